"""Next-action support of pruning: how much of what an agent copies from earlier tool output into
its next tool call is still in the request ctxproxy forwards.

    .venv/bin/python -m bench.next_action [--limit 40] [--max-requests 40] [--jobs J] [--seed S]
        [--variants nomask,defaults,budget32k,share50,share30,mask10] [--read-ratio 0.1]
        [--json out.json] [--learn] [--learn-out rules/packs/reuse.json] [--half held-out]

**Ground truth** (``bench/copied_literals.py``, where the rule is written out): the literals each
assistant tool call copies from earlier tool results alone (a line it read, a path ``find``
printed, an identifier grep showed, an id from a JSON result), each with its source (the most
recent tool result holding it) and age (assistant turns since that result).

**The replay.** ``--limit`` conversations spread evenly over the corpus (0: all; ``--half``: of
one half of it, ``bench/split.py``, as prune's packs are learned on the other), the first
``--max-requests`` requests of each (``tests/support/traces.request_prefixes``; 0: all). Every
configuration replays them one by one with its session state carried between requests, at an
every-turn cadence, warm: a clock advancing uniform(2, 10) s per request (seeded by ``--seed``
and the conversation's id). Each configuration has its emulated prefix cache (TTL 300 s,
1,024-token minimum, the model's tiktoken encoding); before each request ``Context.cache`` holds
``--read-ratio`` and the emulated upstream's answer to the previous one, as a real upstream would
report it. A literal copied by the call at index k is checked against the request forwarded for
``messages[:k]``.

**Configurations.** ``nomask``: the request unmodified (every literal kept: a check of the
rule). ``defaults``: the engine's default rules and budget (the model's window, gpt-4o's when
litellm does not know it, minus the output reserve). ``budget32k``: the same with a budget of
32,000. ``share50`` / ``share30``: 50% / 30% of the largest replayed request of that conversation
(tiktoken, as ``bench.cost`` counts). ``mask10``: tool results older than the last 10 become a
one-line placeholder, no other rule. ``+riskN`` / ``+guardN`` after a ctxproxy configuration:
prune's ``bet_budget_share`` / ``warm_risk_share`` N/100 (``defaults+guard2+risk5``);
``+guardoff``: ``warm_risk_share`` unset (break-even alone).

**Losses** are attributed to what elided the lost literal's source result in that configuration:
``drop`` (the result is not forwarded), else the latest ``report["pruning"]`` decision naming the
result's call id over the session's requests (``cap``, ``supersede``, ``mask``, ``shrink``), else
``mask`` for the baseline, else ``other``; and by kind: a *name* (a path, identifier or id, what
a dropped run's line can name: ``copied_literals.is_name``) or a *line*.

**Thrash**: each configuration's compactions, and those that came fewer than 5 requests after
the same session's previous compaction (a session held at the budget should compact at most once
per 5 requests), each classed by why it came (``bench/next_action_thrash.py``); and the requests
forwarded over the budget, with the median and largest overshoot as a share of the budget.

How much any pruning could keep at a budget (what every request must forward, and whether each
literal's source fits beside it): ``bench/next_action_bound.py``.

**--learn** prints P(copied later | bucket) over the pairs (request, earlier tool result) of
``reuse_learn.need_samples``: by prune's action kind, whether prune's need judgement calls the
result *needed* (the table's "in use" column), age, and kind × needed. ``--learn-out FILE``
writes the pack prune reads (``reuse_learn.reuse_pack``; ``rules/packs/reuse.yaml`` is made by
``--limit 0 --max-requests 0 --variants nomask --learn-out rules/packs/reuse.yaml``).

Runtime with ``--jobs 2`` on 2 cores (2026-11-28): the default (40 conversations, 1,224
requests) 3 s; the whole corpus (``--limit 0 --max-requests 0``, 15,127 requests, ``--learn``)
70 s.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import orjson
import yaml

from bench.cache_emulator import CacheUse, PrefixCache, Segments
from bench.copied_literals import (
    Copied,
    age_bucket,
    copied_literals,
    inject_blocks,
    is_name,
    learn_table,
)
from bench.copied_literals import request_text as forwarded_text
from bench.cost import _counters, _pipeline, budget_of, model_of, spread
from bench.cost_config import guard_share
from bench.next_action_tables import PACK_HEADER, kept_rows, print_learn, print_rows
from bench.next_action_thrash import Cut, count_compaction, count_overshoot, print_classes
from bench.reuse_learn import need_samples, reuse_pack
from bench.split import HALVES, in_half
from proxy.rewrite.budgets import default_window_room
from proxy.store.redact_state import redact_state
from proxy.tokens import RequestTokens, ensure_offline_tiktoken
from rules.base import CacheFacts, Context, Message, SessionState
from rules.messages import PLACEHOLDER_PREFIX, role, text_of, with_content
from tests.support.traces import iter_conversations, request_prefixes

DEFAULT_VARIANTS = "nomask,defaults,budget32k,share50,share30,mask10"
TTL_S, MIN_PREFIX_TOKENS, STEP_S = 300.0, 1024, (2.0, 10.0)
MASK_PLACEHOLDER = f"{PLACEHOLDER_PREFIX} observation omitted]"


@dataclass(frozen=True)
class Variant:
    name: str
    kind: str  # nomask | ctxproxy | mask
    budget: int | None = None  # ctxproxy: configured budget
    share: float | None = None  # ctxproxy: budget as this share of the largest request
    risk: float | None = None  # ctxproxy: prune's ``bet_budget_share`` (``+riskN``: N/100)
    # ctxproxy: prune's ``warm_risk_share`` (``+guardN``: N/100; ``+guardoff``: unset)
    guard: float | Literal["off"] | None = None


def parse_variant(name: str) -> Variant:
    base, plus, flag = name.rpartition("+")
    kind = flag.removesuffix("off").rstrip("0123456789")
    if plus and kind in ("guard", "risk"):  # the last flag; the ones before it, recursively
        v = parse_variant(base)
        if v.kind != "ctxproxy":
            raise ValueError(f"{name!r}: +{kind} on a configuration without prune")
        value = flag.removeprefix(kind)
        if kind == "guard":
            return replace(v, name=name, guard=guard_share(value))
        return replace(v, name=name, risk=int(value or 0) / 100)
    if name in ("nomask", "defaults"):
        return Variant(name, "ctxproxy" if name == "defaults" else "nomask")
    if name.startswith("budget"):
        raw = name.removeprefix("budget").lower()
        number = int(float(raw[:-1]) * 1000) if raw.endswith("k") else int(raw)
        return Variant(name, "ctxproxy", budget=number)
    if name.startswith("share"):
        return Variant(name, "ctxproxy", share=int(name.removeprefix("share")) / 100)
    if name.startswith("mask"):
        return Variant(name, "mask", budget=int(name.removeprefix("mask") or 10))
    raise ValueError(f"unknown configuration {name!r}")


def mask_older(messages: list[Message], keep: int) -> list[Message]:
    """Every tool result but the last ``keep`` replaced by the placeholder."""
    tools = [i for i, m in enumerate(messages) if role(m) == "tool"]
    old = set(tools[: max(0, len(tools) - keep)])
    return [with_content(m, MASK_PLACEHOLDER) if i in old else m for i, m in enumerate(messages)]


# ---------------------------------------------------------------- one conversation


@dataclass(frozen=True)
class Job:
    conv: dict[str, Any]
    variants: tuple[Variant, ...]
    seed: int
    max_requests: int
    read_ratio: float
    learn: bool


@dataclass
class Outcome:
    requests: int = 0
    # variant -> counts: "n <bucket>" literals and "kept <bucket>" by age bucket, "lost: <stage>"
    # by what elided the source result, "saved: inject|elsewhere" kept though it was elided
    tally: dict[str, Counter[str]] = field(default_factory=dict)
    rule_errors: Counter[str] = field(default_factory=Counter)  # variant -> errors (rule skipped)
    learn: Counter[tuple[str, bool, str, bool]] = field(default_factory=Counter)

    def merge(self, other: Outcome) -> None:
        self.requests += other.requests
        for name, c in other.tally.items():
            self.tally.setdefault(name, Counter()).update(c)
        self.learn.update(other.learn)
        self.rule_errors.update(other.rule_errors)


@dataclass
class Lane:
    """One configuration through one session: its cache, upstream answer, state, decisions."""

    variant: Variant
    budget: int | None
    cache: PrefixCache
    state: SessionState = field(default_factory=SessionState)
    last: CacheUse | None = None
    last_at: float | None = None
    actions: dict[str, str] = field(default_factory=dict)  # call id -> latest prune decision
    rule_errors: int = 0
    compacted: str = ""  # the schedule's decision when the last request was compacted
    compacted_at: int | None = None  # the request (0-based) of the session's last compaction
    over: bool = False  # the last request forwarded was still over the budget
    prune: dict[str, Any] = field(default_factory=dict)  # the last request's prune report
    cut: Cut | None = None  # the session's last compaction's figures


_SEGMENTS: dict[str, Segments] = {}


def _segments(encoding: str) -> Segments:
    seg = _SEGMENTS.get(encoding)
    if seg is None:
        ensure_offline_tiktoken()
        import tiktoken

        seg = _SEGMENTS[encoding] = Segments(tiktoken.get_encoding(encoding).encode_ordinary)
    seg.clear()
    return seg


def _forward(lane: Lane, job: Job, model: str, prefix: list[Message], now: float) -> Any:
    v = lane.variant
    if v.kind == "nomask":
        return prefix
    if v.kind == "mask":
        return mask_older(prefix, v.budget or 10)
    last = lane.last
    facts = CacheFacts(
        read_ratio=job.read_ratio,
        ttl_s=TTL_S,
        min_prefix_tokens=MIN_PREFIX_TOKENS,
        last_at=lane.last_at,
        last_prompt_tokens=last.prompt_tokens if last else None,
        last_cached_tokens=last.cached_tokens if last else None,
        last_cache_write_tokens=last.write_tokens if last else None,
    )
    ctx = Context(
        messages=prefix,
        original_messages=prefix,
        model=model,
        tokens=RequestTokens(_counters().for_model(model)),
        now=now,
        session_id=f"next-action-{job.conv['id']}",
        state=lane.state,
        request={"model": model, "messages": prefix},
        budget=lane.budget,
        window_room=default_window_room(model),
        cache=facts,
    )
    outcome = _pipeline((), risk=v.risk, guard=v.guard).run(ctx)
    lane.state = redact_state(outcome.state, lane.state)
    lane.rule_errors += len(outcome.report.get("rule_errors") or [])
    prune = outcome.report.get("prune") or {}
    lane.compacted = (
        str((prune.get("schedule") or {}).get("decision")) if prune.get("compacted") else ""
    )
    lane.over = bool(prune.get("over_budget"))
    lane.prune = prune
    for d in outcome.report.get("pruning") or []:
        cid = d.get("tool_call_id")
        if cid:  # a drop names no call: a dropped result is missing from the output instead
            lane.actions[cid] = d["action"]
    return outcome.messages


def _account(
    out: Outcome, lane: Lane, copied: list[Copied], msgs: list[Message], forwarded: list[Message]
) -> None:
    """Each literal kept or lost. A lost one is charged to what elided its source result (see
    the module docstring); a kept one whose source result was elided notes where it survived."""
    text = forwarded_text(forwarded)
    results = {
        m.get("tool_call_id"): text_of(m.get("content")) for m in forwarded if role(m) == "tool"
    }
    tally, blocks = out.tally.setdefault(lane.variant.name, Counter()), None
    for c in copied:
        hit = c.literal in text
        tally[f"n {age_bucket(c.age)}"] += 1
        tally[f"kept {age_bucket(c.age)}"] += hit
        cid = msgs[c.source].get("tool_call_id")
        source = results.get(cid)
        if not hit:
            fallback = "mask" if lane.variant.kind == "mask" else "other"
            stage = "drop" if source is None else lane.actions.get(str(cid), fallback)
            tally[f"lost: {stage}"] += 1
            tally["lost kind: name" if is_name(c.literal) else "lost kind: line"] += 1
        elif source is None or c.literal not in source:
            blocks = inject_blocks(text) if blocks is None else blocks
            tally["saved: inject" if c.literal in blocks else "saved: elsewhere"] += 1


def replay(job: Job) -> Outcome:
    """A worker's task: one conversation through every configuration."""
    msgs = job.conv["messages"]
    prefixes = list(request_prefixes(msgs))
    if job.max_requests:
        prefixes = prefixes[: job.max_requests]
    out = Outcome(requests=len(prefixes))
    if not prefixes:
        return out
    model = model_of(job.conv)
    counter = _counters().for_model(model)
    segments = _segments(counter.encoding_name)
    calls = {len(p) for p in prefixes}  # the assistant message each request produced
    by_call: dict[int, list[Copied]] = {}
    for c in copied_literals(msgs, until=len(prefixes[-1]) + 1):
        if c.call_index in calls:
            by_call.setdefault(c.call_index, []).append(c)
    largest = (
        max(counter.count_messages(p) for p in prefixes)
        if any(v.share for v in job.variants)
        else 0
    )
    lanes = []
    for v in job.variants:
        configured = max(256, int(largest * v.share)) if v.share else v.budget
        budget = budget_of(model, configured) if v.kind == "ctxproxy" else None
        lanes.append(Lane(v, budget, PrefixCache(segments, TTL_S, MIN_PREFIX_TOKENS)))
        out.tally[v.name] = Counter()
    rng = random.Random(f"{job.seed}:{job.conv['id']}")
    now = 0.0
    for n, prefix in enumerate(prefixes):
        now += rng.uniform(*STEP_S) if n else 0.0  # every turn, no idle gap: the cache stays warm
        segments.next_request()
        copied = by_call.get(len(prefix), [])
        for lane in lanes:
            forwarded = _forward(lane, job, model, prefix, now)
            lane.last, lane.last_at = lane.cache.send(segments.of(forwarded), now), now
            out.tally[lane.variant.name]["over budget"] += lane.over
            if lane.over:
                count_overshoot(out.tally[lane.variant.name], lane.prune)
            if lane.compacted:
                count_compaction(out.tally[lane.variant.name], lane, n)
            if copied:
                _account(out, lane, copied, msgs, forwarded)
    out.rule_errors.update({lane.variant.name: lane.rule_errors for lane in lanes})
    if job.learn:
        copied = [c for cs in by_call.values() for c in cs]
        out.learn = need_samples(msgs, [len(p) for p in prefixes], copied)
    return out


# ---------------------------------------------------------------- the run


def run_jobs(jobs: list[Job], workers: int) -> Iterable[Outcome]:
    if workers <= 1:
        return map(replay, jobs)
    context = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else None)
    pool = context.Pool(workers)
    order = sorted(jobs, key=lambda j: -len(j.conv["messages"]))  # longest first
    results = pool.imap_unordered(replay, order, chunksize=1)
    pool.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--limit", type=int, default=40, help="conversations (0: all)")
    parser.add_argument("--max-requests", type=int, default=40, help="per conversation (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--variants", default=DEFAULT_VARIANTS)
    parser.add_argument("--read-ratio", type=float, default=0.1, help="cached token price ratio")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument("--half", choices=("all", *HALVES), default="all", help="bench/split.py")
    parser.add_argument("--learn", action="store_true", help="P(copied later | bucket) table")
    parser.add_argument("--learn-out", default=None, help="write the --learn rates as a pack")
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    started = time.perf_counter()
    try:
        variants = [parse_variant(v.strip()) for v in args.variants.split(",") if v.strip()]
    except ValueError as exc:
        parser.error(str(exc))
    learn = args.learn or bool(args.learn_out)
    chosen = spread(in_half(iter_conversations(), args.half), args.limit)
    jobs = [
        Job(c, tuple(variants), args.seed, args.max_requests, args.read_ratio, learn)
        for c in chosen
    ]
    total = Outcome()
    for n, outcome in enumerate(run_jobs(jobs, args.jobs), 1):
        if sys.stderr.isatty():
            print(f"\r{n}/{len(jobs)} conversations", end="", file=sys.stderr, flush=True)
        total.merge(outcome)
    seconds = time.perf_counter() - started
    rows = kept_rows(total, variants)
    print(
        f"\n{len(chosen)} conversations, {total.requests:,} requests (the first "
        f"{args.max_requests or 'all'} of each), r = {args.read_ratio}, seed {args.seed}, "
        f"{seconds:.0f} s on {args.jobs} worker(s)\n"
    )
    print_rows(rows)
    print_classes(rows)
    if +total.rule_errors:  # a rule raised: the server skips it, so these rows are not its own
        print(f"\nrule errors (the rule skipped, as the server does): {dict(+total.rule_errors)}")
    table = learn_table(total.learn) if learn else {}
    if args.learn:
        print_learn(table)
    if args.learn_out:
        source = "python -m bench.next_action " + " ".join(argv or sys.argv[1:])
        pack = reuse_pack(total.learn, source, len(chosen))
        with open(args.learn_out, "w", encoding="utf-8") as pack_file:
            pack_file.write(PACK_HEADER + yaml.safe_dump(pack, sort_keys=False, width=100))
    if args.json:
        data = {
            "conversations": len(chosen),
            "requests": total.requests,
            "max_requests": args.max_requests,
            "seed": args.seed,
            "read_ratio": args.read_ratio,
            "seconds": round(seconds, 1),
            "rows": rows,
            "rule_errors": dict(+total.rule_errors),
            "learn": {
                f: {v: {"samples": s, "copied": c} for v, (s, c) in cells.items()}
                for f, cells in table.items()
            },
        }
        with open(args.json, "wb") as f:
            f.write(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
