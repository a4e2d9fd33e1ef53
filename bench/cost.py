"""Cost under the provider's prompt cache: every method's effective input cost relative to sending
the same requests direct, on the trace corpus, side by side, in aggregate and per conversation,
with the offline-optimal compaction schedule as a yardstick.

    .venv/bin/python -m bench.cost [--limit N] [--seed S] [--jobs J] [--json out.json]
                                   [--cadence every-turn|idle|even] [--interval S]
                                   [--max-requests N] [--protocol chat|anthropic|responses]
                                   [--cache prefix|anthropic|responses]
                                   [--variants direct,defaults,budget32k,mask10,microcompact]
                                   [--prices 0.1,0.25,0.5,0.1w] [--rules-off inject]
                                   [--envelope-sessions 3] [--no-optimal]
                                   [--half all|train|held-out]

**The replay** (``bench/replay.py``). Each conversation is one session, replayed turn by turn:
every request an agent would send (``tests/support/traces.request_prefixes``; with
``--max-requests N`` the first N), through each method, with session state carried between
requests. A simulated clock, seeded per conversation by ``--seed`` and its id (so ``--limit``
never changes a conversation's clock), gives every method the same send times; its cadence
(``bench/cost_config.timeline``):

- ``every-turn`` (the default): uniform(2, 10) s between any two requests, no idle gaps; the
  cache stays warm, as in an agent's loop;
- ``idle``: the same agent steps, but a user turn (a request whose last message is a new user
  message, after the first) waits an idle gap drawn from a lognormal with a median of 60 s and
  σ = 1.7 (mean ≈ 4 min; 17% of gaps exceed the 300 s TTL, 6% exceed 15 min);
- ``even``: ``--interval`` seconds (default 60) between any two requests.

**The caches**, one per method and session, never shared between sessions (``--cache``; by
default the protocol's: ``anthropic`` for ``--protocol anthropic``, else ``prefix``):

- ``prefix`` (``bench/cache_emulator.py``; ``responses`` is the same cache, the Responses API's
  automatic prefix caching): a prefix cache at token level on the request serialised segment by
  segment (orjson, sorted keys; tiktoken with the model's encoding), read from 1,024 tokens in
  128-token steps (the common prefix with any live entry, rounded down), entries expiring 300 s
  after their last use (a hit refreshes), every cacheable request writing its own prompt;
- ``anthropic`` (``bench/breakpoint_cache.py``, ``--protocol anthropic`` only): Anthropic's
  explicit breakpoints. The request is a sequence of content blocks (each tool, each system
  block, each message's blocks); at each ``cache_control`` breakpoint the cache reads the
  longest live prefix written at a block boundary from that block back to 20 blocks before it;
  each breakpoint writes its prefix; the tokens from the read point to the last breakpoint are
  the written ones, those after it plain input; 1,024-token minimum, 300 s TTL refreshed on a
  hit. The client's breakpoints are placed as Claude Code places them
  (``bench/protocol_convert.with_breakpoints``: the last system block and the last message's
  last block, which moves every request); ``requests whose forwarded breakpoints moved or went``
  counts the rewritten requests where a marker is not on the block the client put it on.

**Prices** (``--prices``, in fresh-token units): r = 0.1, 0.25 and 0.5 (a cached token's price;
writes at 1×), and r = 0.1 with Anthropic's 1.25× for tokens written (``0.1w``). Before each
request, ``Context.cache`` (``CacheFacts``) holds the variant's prices, the TTL, the minimum
prefix and the emulated upstream's answer for the session's previous request of that method
(time, prompt, cached and written tokens).

**The methods** (``bench/cost_config.parse_variant``). ``direct``: the prefix unmodified (the
reference). ``defaults``: ctxproxy's default rule list (``Settings().configured_rules()``) with
the budget the engine computes (the corpus model's window, or gpt-4o's 128k when litellm does
not know it, minus the output reserve). ``budget32k``: the same at ``--budget 32000``.
``mask10``: every request, tool results older than the last 10 become a one-line placeholder.
``microcompact``: Claude Code's time-based clearing: when the gap since the previous request
exceeds the TTL, results older than the last 5 are cleared, and stay cleared. The baselines
rewrite what the client sent (no chain repair). A ctxproxy variant name may end in
``-no-RULE[+RULE]`` (``defaults-no-inject``); ``--rules-off inject`` adds such a twin to every
ctxproxy variant. The ctxproxy pipeline runs once per price variant, since rules may read the
prices; while no rule reads them (watched on ``CacheFacts``), the variants share one run, which
is exact (same input, same output).

**Columns** (``bench/cost_stats.py``, ``bench/cost_tables.py``). Cost, per price variant: the
effective input cost (uncached + r × cached, + 0.25 × written in the ``0.1w`` variant) summed
over all requests (long conversations weigh more), relative to direct's; then the distribution
of the per-conversation ratio (the method's cost of one conversation ÷ direct's of the same):
median and p90, and the share of conversations above 1.00 and above 1.02. Tokens forwarded
(share of direct's); cache hit (cached / prompt tokens); compactions (ctxproxy: requests whose
prune report says ``compacted``; microcompact: clearings); evidence kept, as in
``bench/pruning.py`` (share of requests keeping verbatim the latest failure, the first user
message, the latest write call of each changed file; only requests whose input chain is valid;
inject's blocks are set aside first); broken chains (requests where the chain validator finds a
violation the input did not have); pipeline ms per request (mean and p50). Non-cost columns of
a ctxproxy row are its first price variant's run's. ``--json`` adds each lane's sums and every
per-conversation ratio.

**Offline optimal** (``bench/optimal.py``, inputs from prune's planner in
``bench/optimal_inputs.py``; skipped with ``--no-optimal``): per conversation and ctxproxy
method without rules off (its budget), the least-cost compaction schedule with the future known,
over the same elisions prune's planner offers at each request (supersede, mask, shrink),
computed analytically (warm cache every request; the model and its simplifications are that
module's docstring). Per price: the optimal saving against direct in that model, the replay's
saving of the method (emulated cache), and online ÷ optimal: over the summed costs, and the
median of the per-conversation ratio over the conversations where the optimal saves anything.
The analytic model overstates what the real edits reach; ``bench/optimal_real.py`` is the
optimal over the real edits, each segment of a schedule priced by a replay (slower).

**Envelopes.** On the longest conversations of the corpus (tiktoken size of the last request
replayed), at a budget of 30% of that size: the share of tool calls keeping their envelope (the
assistant's call is still in the forwarded request, whatever happened to its arguments), over
all requests and at the last one.

**Other protocols** (``--protocol anthropic|responses``; default ``chat``). Each request is
converted as the protocol's client would send it (``bench/protocol_convert.py``: Claude Code's
Messages body, with its breakpoints under the ``anthropic`` cache; Codex's Responses body, the
first system message as ``instructions``, reasoning items with ``encrypted_content``), and a
ctxproxy method rewrites it as ``Engine.rewrite`` does: ``adapter.lower`` → the pipeline (the
Context built from the chat view, with the adapter's tools) → ``adapter.lift`` →
``describe_lift`` (the final integrity check). ``direct`` sends the converted body unchanged.
The prefix cache reads the body as serialised in the protocol, one segment each (``wire_parts``:
tools, then Anthropic's ``system`` and each message, or the Responses ``instructions`` and each
input item). Chain and evidence columns are checked on the chat view of what is forwarded; a
chain counts as broken also when the forwarded body fails its protocol's own check
(``proxy/protocols/checks.py``) where the client's passed it, or the report has an
``integrity`` entry. Only ``direct`` and ctxproxy variants run (the baselines rewrite chat
messages). ``bench/cost_protocol_diff.py`` splits a protocol's difference from the chat replay
into other decisions and the wire's own weight.

**Layout.** ``bench/cost.py`` (this: the command line), ``cost_config`` (constants, prices,
methods, the job, the clock), ``cost_rewrite`` (the baselines, the checks' helpers, protocol
conversion), ``cost_lanes`` (a lane, the per-process memos, the envelope jobs), ``replay`` (one
conversation), ``cost_stats`` (sums, distributions, rows), ``cost_tables`` (printing, the
``--json`` file), ``optimal`` and ``optimal_inputs``; the names other benches use are
re-exported here.

``--limit N`` takes N conversations spread evenly over the corpus (every source represented);
``--half train|held-out`` first keeps one half of it (``bench/split.py``: prune's warm-cache
schedule learns its survival table on ``train``).
Runtime with ``--jobs 2`` on 2 cores (2026-11-28, where the rules read the prices, so every
ctxproxy method runs once per price variant), start-up included: the default (40
conversations, 2,763 requests, five methods, four prices, the optimal and envelope tables) 29 s;
``--limit 40 --jobs 2 --cadence every-turn --max-requests 40 --variants defaults,budget32k``
(1,224 requests) 7 s on the chat protocol, 7 s with ``--protocol anthropic`` (the breakpoint
cache), 10 s with ``--protocol responses``, up to twice that next to other work.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from bench.cache_emulator import CacheUse, PrefixCache, Pricing, Segments
from bench.cost_config import (
    CACHES,
    CADENCES,
    CLEARED,
    DEFAULT_LIMIT,
    DEFAULT_PRICES,
    EVEN_INTERVAL_S,
    FALLBACK_MODEL,
    MASK_PLACEHOLDER,
    MIN_PREFIX_TOKENS,
    PRICES,
    PRICINGS,
    PROTOCOLS,
    STEP_S,
    TTL_S,
    USER_GAP_MEDIAN_S,
    USER_GAP_SIGMA,
    Job,
    Method,
    budget_of,
    model_of,
    parse_variant,
    timeline,
)
from bench.cost_lanes import Lane, WatchedFacts, _counters, _pipeline, _segments, envelope_jobs
from bench.cost_rewrite import (
    chat_view,
    convert,
    mask_older,
    wire_parts,
    without_injected,
)
from bench.cost_stats import Outcome, Stats, Totals
from bench.cost_tables import fmt_ratio, fmt_share, report
from bench.replay import Replay, replay_job, run_jobs
from bench.split import HALVES, in_half
from proxy.settings import Settings
from proxy.store.redact_state import redact_state
from proxy.tokens import RequestTokens
from rules.base import CacheFacts, Context, Message, SessionState
from tests.support.traces import iter_conversations, request_prefixes

__all__ = [  # what other benches and the tests import from here
    "CLEARED",
    "DEFAULT_LIMIT",
    "EVEN_INTERVAL_S",
    "FALLBACK_MODEL",
    "MASK_PLACEHOLDER",
    "MIN_PREFIX_TOKENS",
    "PRICES",
    "PRICINGS",
    "STEP_S",
    "TTL_S",
    "USER_GAP_MEDIAN_S",
    "USER_GAP_SIGMA",
    "CacheFacts",
    "CacheUse",
    "Context",
    "Job",
    "Lane",
    "Message",
    "Method",
    "Outcome",
    "PrefixCache",
    "Pricing",
    "Replay",
    "RequestTokens",
    "Segments",
    "SessionState",
    "Stats",
    "WatchedFacts",
    "_counters",
    "_pipeline",
    "_segments",
    "budget_of",
    "chat_view",
    "convert",
    "fmt_ratio",
    "fmt_share",
    "iter_conversations",
    "main",
    "mask_older",
    "model_of",
    "parse_variant",
    "redact_state",
    "replay_job",
    "request_prefixes",
    "spread",
    "timeline",
    "wire_parts",
    "without_injected",
]


def spread(items: list[Any], limit: int | None) -> list[Any]:
    """``limit`` items spread evenly over ``items`` (all of them for None or 0)."""
    if not limit or limit >= len(items):
        return items
    return [items[i * len(items) // limit] for i in range(limit)]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help=f"N conversations spread over the corpus (default {DEFAULT_LIMIT}; 0: all)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument(
        "--cadence",
        choices=CADENCES,
        default="every-turn",
        help="the clock: every-turn (2-10 s between requests, warm cache; default), idle "
        "(lognormal idle gaps before user turns), even (--interval between requests)",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=EVEN_INTERVAL_S,
        help=f"seconds between requests with --cadence even (default {EVEN_INTERVAL_S:.0f})",
    )
    parser.add_argument(
        "--max-requests",
        type=int,
        default=0,
        help="the first N requests of each conversation (default 0: all)",
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="chat",
        help="replay as this protocol: each request converted (bench.protocol_convert), rewritten "
        "through its adapter, the forwarded body serialised in the protocol (default chat)",
    )
    parser.add_argument(
        "--cache",
        choices=CACHES,
        default=None,
        help="the emulated cache: prefix (automatic prefix caching; also responses), anthropic "
        "(cache_control breakpoints; --protocol anthropic only); default: the protocol's",
    )
    parser.add_argument(
        "--variants",
        default=None,
        help="methods, comma-separated (direct is always the reference; default "
        "direct,defaults,budget32k,mask10,microcompact, for another protocol than chat "
        "direct,defaults,budget32k: the baselines rewrite chat messages)",
    )
    parser.add_argument(
        "--prices",
        default=",".join(DEFAULT_PRICES),
        help="price variants, comma-separated: 0.1, 0.25, 0.5 (r, the cached token's price), "
        "0.1w (r = 0.1 with Anthropic's 1.25× writes); a ctxproxy method runs once per variant "
        "while a rule reads the prices",
    )
    parser.add_argument(
        "--rules-off",
        default="",
        help="also run each ctxproxy variant with these rules off (comma-separated, e.g. inject)",
    )
    parser.add_argument(
        "--envelope-sessions",
        type=int,
        default=3,
        help="the longest N conversations for the 30%% budget table (0: none)",
    )
    parser.add_argument(
        "--no-optimal", action="store_true", help="skip the offline-optimal schedule's table"
    )
    parser.add_argument(
        "--half",
        default="all",
        choices=("all", *HALVES),
        help="the conversations of one half of the corpus (bench/split.py; default all)",
    )
    return parser


def _methods(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[Method]:
    chat = args.protocol == "chat"
    variants = args.variants or (
        "direct,defaults,budget32k,mask10,microcompact" if chat else "direct,defaults,budget32k"
    )
    names = [v.strip() for v in variants.split(",") if v.strip()]
    methods = [parse_variant(n) for n in (["direct"] if "direct" not in names else []) + names]
    if not chat and any(m.kind not in ("direct", "ctxproxy") for m in methods):
        parser.error(f"--protocol {args.protocol}: only direct and ctxproxy variants")
    off = tuple(r.strip() for r in args.rules_off.split(",") if r.strip())
    if off:
        methods += [
            Method(f"{m.name}-no-{'+'.join(off)}", m.kind, m.budget, m.rules_off + off)
            for m in methods
            if m.kind == "ctxproxy"
        ]
    known_rules = {r.name for r in Settings().configured_rules()}
    for m in methods:
        unknown = set(m.rules_off) - known_rules
        if unknown:
            parser.error(f"{m.name}: unknown rules {sorted(unknown)}")
    return methods


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    started = time.perf_counter()
    chat = args.protocol == "chat"
    cache = args.cache or ("anthropic" if args.protocol == "anthropic" else "prefix")
    if cache == "anthropic" and args.protocol != "anthropic":
        parser.error("--cache anthropic reads cache_control breakpoints: --protocol anthropic")
    methods = _methods(parser, args)
    corpus = list(iter_conversations())
    chosen = spread(in_half(corpus, args.half), args.limit)
    try:
        pricings = tuple(PRICES[k.strip()] for k in args.prices.split(",") if k.strip())
    except KeyError as exc:
        parser.error(f"unknown price variant {exc}; known: {', '.join(PRICES)}")
    if not pricings:
        parser.error("--prices: at least one")
    jobs = [
        Job(
            c,
            tuple(methods),
            pricings,
            args.seed,
            False,
            args.protocol,
            args.cadence,
            args.interval,
            args.max_requests,
            cache,
            not args.no_optimal,
        )
        for c in chosen
    ]
    if args.envelope_sessions:
        jobs += envelope_jobs(corpus, methods, pricings[0], args, cache)

    totals = Totals()
    envelopes: list[Outcome] = []
    for n, outcome in enumerate(run_jobs(jobs, args.jobs), 1):
        if sys.stderr.isatty():
            print(f"\r{n}/{len(jobs)} conversations", end="", file=sys.stderr, flush=True)
        if outcome.envelope:
            envelopes.append(outcome)
        else:
            totals.add(outcome, methods, pricings)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    seconds = time.perf_counter() - started
    report(args, methods, pricings, totals, envelopes, seconds, cache, chat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
