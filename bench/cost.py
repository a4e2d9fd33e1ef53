"""Cost under the provider's prompt cache: every method's effective input cost relative to sending
the same requests direct, on the trace corpus, side by side (issue 10: "every rewrite pays for
itself under the provider's prompt cache").

    .venv/bin/python -m bench.cost [--limit N] [--seed S] [--jobs J] [--json out.json]
                                   [--variants direct,defaults,budget32k,mask10,microcompact]
                                   [--prices 0.1,0.1w,0.5] [--rules-off inject]
                                   [--envelope-sessions 3] [--protocol chat|anthropic|responses]

**The replay.** Each conversation is one session, replayed turn by turn: every request an agent
would send (``tests/support/traces.request_prefixes``), through each method, with session state
carried between requests. A simulated clock (seeded per conversation by ``--seed`` and its id, so
``--limit`` never changes a conversation's clock) advances uniform(2, 10) s per agent step; a user
turn (a request whose last message is a new user message, after the first) waits an idle gap drawn
from a lognormal with a median of 60 s and σ = 1.7 (mean ≈ 4 min; 17% of gaps exceed the 300 s
TTL, 6% exceed 15 min). Every method sees the same clock and gaps.

**The cache** (``bench/cache_emulator.py``, one per method and session, never shared between
sessions): a prefix cache at token
level on the request serialised message by message (orjson, sorted keys; tiktoken with the
model's encoding), read from 1,024 tokens in 128-token steps (the common prefix with any live
entry, rounded down), entries expiring 300 s after their last use (a hit refreshes), every
cacheable request writing its own prompt. Priced at r = 0.1, at r = 0.1 with Anthropic's 1.25×
for tokens written, and at r = 0.5. Before each request, ``Context.cache`` (``CacheFacts``) holds
the variant's prices, the TTL, the minimum prefix and the emulated upstream's answer for the
session's previous request of that method (time, prompt, cached and written tokens; written
tokens are filled for every variant).

**The methods.** ``direct``: the prefix unmodified (the reference). ``defaults``: ctxproxy's
default rule list (``Settings().configured_rules()``) with the budget the engine computes (the
corpus model's window, or gpt-4o's 128k when litellm does not know it, minus the output reserve).
``budget32k``: the same at ``--budget 32000``. ``mask10``: every request, tool results older than
the last 10 become a one-line placeholder. ``microcompact``: Claude Code's time-based clearing:
when the gap since the previous request exceeds the TTL, results older than the last 5 are
cleared, and stay cleared. The baselines rewrite what the client sent (no chain repair). A
ctxproxy variant name may end in ``-no-RULE[+RULE]``
(``defaults-no-inject``); ``--rules-off inject`` adds such a twin to every ctxproxy variant. The
ctxproxy pipeline runs once per price variant, since rules may read the prices; while no rule
reads them (watched on ``CacheFacts``), the variants share one run, which is exact (same input,
same output) and saves two runs in three.

**Columns.** Effective input cost (uncached + r × cached, + 0.25 × written in Anthropic's
variant), summed over all requests (long conversations weigh more), relative to direct's; tokens
forwarded (serialised, share of direct's); cache hit (cached / prompt tokens); compactions
(ctxproxy: requests whose prune report says ``compacted``; microcompact: clearings); evidence
kept, as in ``bench/pruning.py`` (share of requests keeping verbatim the latest failure, the first
user message, the latest write call of each changed file; only requests whose input chain is
valid; inject's blocks are set aside first); broken chains (requests where the chain validator
finds a violation the input did not have); pipeline ms per request (mean and p50). Non-cost
columns of a ctxproxy row are its first price variant's run's. Then, on the three longest
conversations of the corpus (tiktoken size) at a budget of 30% of each one's full size: the share
of tool calls keeping their envelope (the assistant's call is still in the forwarded request,
whatever happened to its arguments), over all requests and at the last one.

**Other protocols** (``--protocol anthropic|responses``; default ``chat``). Each request is
converted as the protocol's client would send it (``bench/protocol_convert.py``: Claude Code's
Messages body; Codex's Responses body, the first system message as ``instructions``, reasoning
items with ``encrypted_content``), and a ctxproxy method rewrites it as ``Engine.rewrite`` does:
``adapter.lower`` → the pipeline (the Context built from the chat view, with the adapter's tools)
→ ``adapter.lift`` → ``describe_lift`` (the final integrity check). ``direct`` sends the
converted body unchanged. The emulated cache reads the body as serialised in the protocol, one
segment each (``wire_parts``: tools, then Anthropic's ``system`` and each message, or the
Responses ``instructions`` and each input item). Chain and evidence columns are checked on the
chat view of what is forwarded (the adapter's lowering); a chain counts as broken also when the
forwarded body fails its protocol's own check (``proxy/protocols/checks.py``) where the client's
passed it, or the report has an ``integrity`` entry. Only ``direct`` and ctxproxy variants run
(the baselines rewrite chat messages). The chat replay is unchanged by this option.

``--limit N`` takes N conversations spread evenly over the corpus (every source represented).
Runtime with ``--jobs 2`` on 2 cores (2026-11-24, the tree of that hour, where the rules read the
prices, so every ctxproxy method runs three times): the default (40 conversations, 2,763
requests, plus the envelope table) 70 s idle, 135 s next to other work; the whole corpus
(``--limit 0``, 15,127 requests) with ``--rules-off inject`` 18 minutes next to other work.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import random
import re
import statistics
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.cache_emulator import CacheUse, PrefixCache, Pricing, Segments
from bench.protocol_convert import to_anthropic, to_responses
from bench.pruning import evidence_items, kept
from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.base import Adapter, strip_tag
from proxy.protocols.checks import anthropic_violations, responses_violations
from proxy.protocols.report import describe_lift
from proxy.protocols.responses import RESPONSES
from proxy.rewrite.model_windows import context_window
from proxy.rewrite.pipeline import Pipeline
from proxy.settings import Settings
from proxy.store.redact_state import redact_state
from proxy.tokens import RequestTokens, TokenCounters, ensure_offline_tiktoken
from rules.base import CacheFacts, Context, Message, SessionState
from rules.chain import validator as chain_validator
from rules.messages import (
    INJECT_CLOSE,
    INJECT_OPEN,
    PLACEHOLDER_PREFIX,
    call_id,
    role,
    tool_calls,
    with_content,
)
from tests.support.traces import iter_conversations, request_prefixes

DEFAULT_LIMIT = 40  # conversations: 1–2.5 minutes with --jobs 2 on 2 cores (all: --limit 0)
TTL_S = 300.0
MIN_PREFIX_TOKENS = 1024
STEP_S = (2.0, 10.0)  # an agent step: uniform seconds
USER_GAP_MEDIAN_S, USER_GAP_SIGMA = 60.0, 1.7  # lognormal idle gap before a user turn
FALLBACK_MODEL = "gpt-4o"
PRICES = {  # --prices keys
    "0.1": Pricing("r=0.1", 0.1),
    "0.1w": Pricing("r=0.1, writes 1.25×", 0.1, 1.25),
    "0.5": Pricing("r=0.5", 0.5),
}
PRICINGS = tuple(PRICES.values())
MASK_PLACEHOLDER = f"{PLACEHOLDER_PREFIX} observation omitted]"
CLEARED = "[Old tool result content cleared]"  # Claude Code's microcompact placeholder
ENVELOPE_SHARE = 0.3
_PRICE_FIELDS = frozenset({"read_ratio", "write_ratio"})  # what differs between price variants


# ---------------------------------------------------------------- methods


@dataclass(frozen=True)
class Method:
    """One row: how a request is rewritten before it goes upstream."""

    name: str
    kind: str  # direct | ctxproxy | mask | microcompact
    budget: int | None = None  # ctxproxy: configured budget (None: the model's window only)
    rules_off: tuple[str, ...] = ()
    keep: int = 0  # mask / microcompact: the last results kept


def parse_variant(name: str) -> Method:
    """``direct``, ``defaults``, ``budget32k`` (or ``budget=N``), ``mask10`` (``maskN``),
    ``microcompact`` (``microcompactN``); ctxproxy ones may end in ``-no-RULE[+RULE…]``."""
    base, _, off = name.partition("-no-")
    rules_off = tuple(r for r in off.split("+") if r)
    if base == "direct":
        return Method(name, "direct")
    if base == "defaults":
        return Method(name, "ctxproxy", None, rules_off)
    if base.startswith("budget"):
        raw = base.removeprefix("budget").lstrip("=").lower()
        number = int(float(raw.removesuffix("k")) * 1000) if raw.endswith("k") else int(raw)
        return Method(name, "ctxproxy", number, rules_off)
    if base.startswith("mask"):
        return Method(name, "mask", keep=int(base.removeprefix("mask") or 10))
    if base.startswith("microcompact"):
        return Method(name, "microcompact", keep=int(base.removeprefix("microcompact") or 5))
    raise ValueError(f"unknown variant {name!r}")


def mask_older(messages: list[Message], keep: int, placeholder: str) -> list[Message]:
    """Every tool result but the last ``keep`` replaced by ``placeholder``."""
    tools = [i for i, m in enumerate(messages) if role(m) == "tool"]
    old = set(tools[: max(0, len(tools) - keep)])
    return [with_content(m, placeholder) if i in old else m for i, m in enumerate(messages)]


_BLOCK = re.compile(r"(?:\n\n)?" + re.escape(INJECT_OPEN) + ".*?" + re.escape(INJECT_CLOSE), re.S)


def _is_block(part: Any) -> bool:
    text = part.get("text") if isinstance(part, dict) else None
    return isinstance(text, str) and text.startswith(INJECT_OPEN)


def without_injected(messages: list[Message], client: set[int]) -> list[Message]:
    """``messages`` with inject's blocks set aside (appended text, a content part or a message of
    their own, wherever they are: blocks are sticky history), so the evidence checks compare the
    client's own messages. ``client``: ids of the messages the client sent (left as they are)."""
    out: list[Message] = []
    changed = False
    for m in messages:
        content = m.get("content")
        if id(m) in client:
            out.append(m)
        elif isinstance(content, str) and INJECT_OPEN in content:
            changed = True
            text = _BLOCK.sub("", content)
            if text or role(m) != "user":  # else a block of its own: gone
                out.append(with_content(m, text))
        elif isinstance(content, list) and any(_is_block(p) for p in content):
            changed = True
            parts = [p for p in content if not _is_block(p)]
            if parts or role(m) != "user":
                out.append(with_content(m, parts))
        else:
            out.append(m)
    return out if changed else messages


def _signatures(
    messages: list[Message], memo: dict[int, tuple[Any, Any]] | None = None
) -> set[tuple[str, str]]:
    """Violations by kind and call id (indices move when a rule drops or repairs messages).
    ``memo``: the validator's per-message checks, kept across the requests of a replay."""
    return {
        (str(v.get("kind")), str(v.get("tool_call_id")))
        for v in chain_validator.find_violations(messages, memo)
    }


# ---------------------------------------------------------------- protocols


PROTOCOLS = ("chat", "anthropic", "responses")
_ADAPTERS: dict[str, Adapter] = {"anthropic": ANTHROPIC, "responses": RESPONSES}
_WIRE_CHECKS = {"anthropic": anthropic_violations, "responses": responses_violations}


def convert(protocol: str, model: str, prefix: list[Message]) -> dict[str, Any]:
    """The request ``prefix`` as a client of ``protocol`` would send it
    (``bench.protocol_convert``; Responses: the first system message as ``instructions``,
    reasoning items with ``encrypted_content``, as Codex sends them)."""
    chat = {"model": model, "messages": prefix}
    if protocol == "anthropic":
        return to_anthropic(chat).body
    if protocol == "responses":
        return to_responses(chat).body
    return chat


def wire_parts(protocol: str, body: dict[str, Any]) -> list[Any]:
    """What the provider's prefix cache reads of a ``protocol`` body, in its order, one segment
    each: the tools (when any), then Anthropic's ``system`` and each message, or the Responses
    ``instructions`` and each input item."""
    head: list[Any] = [body["tools"]] if body.get("tools") else []
    if protocol == "anthropic":
        if body.get("system"):
            head.append(body["system"])
        return head + list(body["messages"])
    if body.get("instructions"):
        head.append(body["instructions"])
    inp = body.get("input")
    return head + (list(inp) if isinstance(inp, list) else [inp])


def _one_text_block(m: Message) -> Message:
    """A lowered Anthropic message whose content, inject's block set aside, is one text part: as
    the adapter lowers a single text block (a string), so the client's text compares equal."""
    content = m.get("content")
    if (
        isinstance(content, list)
        and len(content) == 1
        and isinstance(content[0], dict)
        and content[0].get("type") == "text"
        and isinstance(content[0].get("text"), str)
    ):
        return with_content(m, content[0]["text"])
    return m


def chat_view(adapter: Adapter, body: dict[str, Any]) -> list[Message]:
    """A protocol body as the rules read it (its adapter's lowering, provenance tags stripped)."""
    return [strip_tag(m) for m in adapter.lower(body).messages]


# ---------------------------------------------------------------- clock


def timeline(conv_id: str, prefixes: list[list[Message]], seed: int) -> list[float]:
    """Simulated send time of each request (see the module docstring)."""
    rng = random.Random(f"{seed}:{conv_id}")
    now, out = 0.0, []
    for k, prefix in enumerate(prefixes):
        if k:
            if role(prefix[-1]) == "user":
                now += rng.lognormvariate(math.log(USER_GAP_MEDIAN_S), USER_GAP_SIGMA)
            else:
                now += rng.uniform(*STEP_S)
        out.append(now)
    return out


# ---------------------------------------------------------------- lanes


@dataclass
class Stats:
    """Sums over requests for one (method, price variant); merged across conversations."""

    requests: int = 0
    prompt: int = 0
    cached: int = 0
    written: int = 0
    compactions: int = 0
    broken: int = 0
    rule_errors: int = 0
    integrity_repairs: int = 0
    evidence: dict[str, list[float]] = field(default_factory=dict)  # key -> [sum, n]
    ms: list[float] = field(default_factory=list)
    calls: int = 0  # envelope mode: tool calls in the inputs
    calls_kept: int = 0
    last_calls: int = 0
    last_calls_kept: int = 0

    def merge(self, other: Stats) -> None:
        for name in (
            "requests",
            "prompt",
            "cached",
            "written",
            "compactions",
            "broken",
            "rule_errors",
            "integrity_repairs",
            "calls",
            "calls_kept",
            "last_calls",
            "last_calls_kept",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for key, (total, n) in other.evidence.items():
            mine = self.evidence.setdefault(key, [0.0, 0.0])
            mine[0] += total
            mine[1] += n
        self.ms.extend(other.ms)

    def cost(self, pricing: Pricing) -> float:
        return pricing.cost(CacheUse(self.prompt, self.cached, self.written))

    def share(self, key: str) -> float:
        total, n = self.evidence.get(key, (0.0, 0.0))
        return total / n if n else float("nan")


@dataclass
class Lane:
    """One method (at one price variant, for ctxproxy) through one session: its cache, what the
    upstream last answered, its session state, its sums."""

    method: Method
    pricing: Pricing | None  # None: the method does not depend on prices (priced afterwards)
    cache: PrefixCache
    stats: Stats = field(default_factory=Stats)
    state: SessionState = field(default_factory=SessionState)
    last_use: CacheUse | None = None
    last_at: float | None = None
    cleared: set[int] = field(default_factory=set)  # microcompact

    def facts(self, watched: bool) -> CacheFacts:
        pricing = self.pricing or PRICINGS[0]
        last = self.last_use
        cls = WatchedFacts if watched else CacheFacts
        return cls(
            read_ratio=pricing.read_ratio,
            write_ratio=pricing.write_ratio,
            ttl_s=TTL_S,
            min_prefix_tokens=MIN_PREFIX_TOKENS,
            last_at=self.last_at,
            last_prompt_tokens=last.prompt_tokens if last else None,
            last_cached_tokens=last.cached_tokens if last else None,
            last_cache_write_tokens=last.write_tokens if last else None,
        )


@dataclass(frozen=True)
class WatchedFacts(CacheFacts):
    """CacheFacts that note which price fields a rule read: while none is read, every price
    variant of a ctxproxy method gets the same output, so one run serves them all."""

    reads: set[str] = field(default_factory=set, compare=False, repr=False)

    def __getattribute__(self, name: str) -> Any:
        if name in _PRICE_FIELDS:
            object.__getattribute__(self, "reads").add(name)
        return object.__getattribute__(self, name)


# ---------------------------------------------------------------- one conversation


@dataclass(frozen=True)
class Job:
    conv: dict[str, Any]
    methods: tuple[Method, ...]
    pricings: tuple[Pricing, ...]
    seed: int
    envelope: bool = False  # count tool-call envelopes (the 30% budget table)
    protocol: str = "chat"  # each request converted to it, rewritten through its adapter


@dataclass
class Outcome:
    conv_id: str
    stats: dict[tuple[str, str], Stats]  # (method, pricing name or "") -> sums
    requests: int
    user_turns: int
    idle_over_ttl: int
    full_tokens: int
    shared_runs: int  # ctxproxy (method, request)s served by one run for every price variant
    split_runs: int  # ... and by one run per variant (a rule read the prices, then or before)
    envelope: bool


_COUNTERS: TokenCounters | None = None
_PIPELINES: dict[tuple[str, ...], Pipeline] = {}
_SEGMENTS: dict[str, Segments] = {}


def _counters() -> TokenCounters:
    global _COUNTERS
    if _COUNTERS is None:
        _COUNTERS = TokenCounters()
    return _COUNTERS


def _pipeline(rules_off: tuple[str, ...]) -> Pipeline:
    """The default rule list (minus ``rules_off``), as the engine builds it; one per process."""
    pipeline = _PIPELINES.get(rules_off)
    if pipeline is None:
        settings = Settings()
        rules = [r for r in settings.configured_rules() if r.name not in rules_off]
        pipeline = _PIPELINES[rules_off] = Pipeline(rules, settings.pipeline.on_rule_error)
    return pipeline


def _segments(encoding: str) -> Segments:
    seg = _SEGMENTS.get(encoding)
    if seg is None:
        ensure_offline_tiktoken()
        import tiktoken

        seg = _SEGMENTS[encoding] = Segments(tiktoken.get_encoding(encoding).encode_ordinary)
    return seg


def model_of(conv: dict[str, Any]) -> str:
    """The corpus model when litellm knows its window, else gpt-4o."""
    named = (conv.get("meta") or {}).get("model")
    return named if isinstance(named, str) and context_window(named) else FALLBACK_MODEL


def budget_of(model: str, configured: int | None) -> int:
    """As ``Engine.budget_for``: min(configured, window − output reserve)."""
    window = context_window(model) or context_window(FALLBACK_MODEL) or 128_000
    limits = [max(256, window - Settings().pipeline.output_reserve_tokens)]
    if configured:
        limits.append(configured)
    return min(limits)


class Replay:
    """One conversation through every method, request by request, on one clock."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.conv = job.conv
        self.model = model_of(job.conv)
        self.counter = _counters().for_model(self.model)
        self.segments = _segments(self.counter.encoding_name)
        self.segments.clear()
        self.lanes: list[Lane] = []
        # ctxproxy: per method, groups of lanes (one per price variant) sharing one run
        self.groups: dict[Method, list[list[Lane]]] = {}
        self.budgets = {m: budget_of(self.model, m.budget) for m in job.methods}
        self.shared_runs = self.split_runs = 0
        self.checks: dict[int, tuple[Any, Any]] = {}  # the chain validator's memo
        self.protocol = job.protocol
        self.adapter = _ADAPTERS.get(job.protocol)  # None: chat, the rules' own model
        for method in job.methods:
            if method.kind == "ctxproxy":
                lanes = [self._lane(method, p) for p in job.pricings]
                self.groups[method] = [lanes]
            else:
                self._lane(method, None)

    def _lane(self, method: Method, pricing: Pricing | None) -> Lane:
        lane = Lane(method, pricing, PrefixCache(self.segments, TTL_S, MIN_PREFIX_TOKENS))
        self.lanes.append(lane)
        return lane

    def run(self) -> Outcome:
        full = self.conv["messages"]
        prefixes = list(request_prefixes(full))
        times = timeline(self.conv["id"], prefixes, self.job.seed)
        user_turns = idle = 0
        for k, (prefix, now) in enumerate(zip(prefixes, times, strict=True)):
            if k and role(prefix[-1]) == "user":
                user_turns += 1
                idle += now - times[k - 1] > TTL_S
            self.step(prefix, now, last=k == len(prefixes) - 1)
        stats = {
            (lane.method.name, lane.pricing.name if lane.pricing else ""): lane.stats
            for lane in self.lanes
        }
        return Outcome(
            self.conv["id"],
            stats,
            len(prefixes),
            user_turns,
            idle,
            self.counter.count_messages(full),
            self.shared_runs,
            self.split_runs,
            self.job.envelope,
        )

    def step(self, prefix: list[Message], now: float, last: bool) -> None:
        self.segments.next_request()
        # another protocol: the request as its client sends it (what direct forwards), and its
        # chat view, on which the chain and the evidence are checked
        request: Any = prefix
        view = prefix
        if self.adapter is not None:
            request = convert(self.protocol, self.model, prefix)
            view = chat_view(self.adapter, request)
        # the validator's checks of the client's messages serve every later request; the rest
        # (rewritten copies, made anew per request) are let go
        client = {id(m) for m in view}
        self.checks = {k: v for k, v in self.checks.items() if k in client}
        before = _signatures(view, self.checks)
        items = None if before else evidence_items(view)
        calls = {call_id(c) for m in view for c in tool_calls(m)} if self.job.envelope else None
        outs: dict[int, tuple[Any, dict[str, Any] | None, float | None]] = {}
        for lane in self.lanes:
            method = lane.method
            if method.kind == "direct":
                outs[id(lane)] = (request, None, None)
            elif method.kind == "mask":
                outs[id(lane)] = (mask_older(prefix, method.keep, MASK_PLACEHOLDER), None, None)
            elif method.kind == "microcompact":
                outs[id(lane)] = (self._microcompact(lane, prefix, now), None, None)
        for method, groups in self.groups.items():
            outs.update(self._ctxproxy(method, groups, request, now))
            if len(self.job.pricings) > 1:
                if len(groups) == 1:
                    self.shared_runs += 1
                else:
                    self.split_runs += 1
        checked: dict[int, tuple[dict[str, float | None], bool, list[Message]]] = {}
        for lane in self.lanes:
            out, report, ms = outs[id(lane)]
            facts = (before, items, calls, last, client)
            self._account(lane, request, view, out, report, ms, now, facts, checked)

    def _microcompact(self, lane: Lane, prefix: list[Message], now: float) -> list[Message]:
        if lane.last_at is not None and now - lane.last_at > TTL_S:
            tools = [i for i, m in enumerate(prefix) if role(m) == "tool"]
            new = set(tools[: max(0, len(tools) - lane.method.keep)]) - lane.cleared
            if new:
                lane.cleared |= new
                lane.stats.compactions += 1
        if not lane.cleared:
            return prefix
        # prefixes only grow, so a cleared index names the same result in every later request
        return [with_content(m, CLEARED) if i in lane.cleared else m for i, m in enumerate(prefix)]

    def _ctxproxy(
        self, method: Method, groups: list[list[Lane]], prefix: Any, now: float
    ) -> Iterator[tuple[int, tuple[Any, dict[str, Any], float]]]:
        """``prefix``: the request (chat messages, or another protocol's body)."""
        pipeline = _pipeline(method.rules_off)
        budget = self.budgets[method]
        for group in list(groups):
            lead = group[0]
            facts = lead.facts(watched=len(group) > 1)
            state = lead.state
            answer = self._run(pipeline, prefix, now, budget, state, facts)
            if len(group) > 1 and isinstance(facts, WatchedFacts) and facts.reads:
                # a rule read the prices: from now on, one run per price variant
                groups.remove(group)
                groups.append([lead])
                lead.state = answer[3]
                yield id(lead), answer[:3]
                for lane in group[1:]:
                    mine = self._run(pipeline, prefix, now, budget, state, lane.facts(False))
                    lane.state = mine[3]
                    groups.append([lane])
                    yield id(lane), mine[:3]
                continue
            for lane in group:
                lane.state = answer[3]
                yield id(lane), answer[:3]

    def _run(
        self,
        pipeline: Pipeline,
        prefix: Any,
        now: float,
        budget: int,
        state: SessionState,
        facts: CacheFacts,
    ) -> tuple[Any, dict[str, Any], float, SessionState]:
        """One request through the pipeline, the Context built as the engine builds it."""
        if self.adapter is not None:
            return self._run_protocol(pipeline, prefix, now, budget, state, facts)
        ctx = Context(
            messages=prefix,
            original_messages=prefix,
            model=self.model,
            tokens=RequestTokens(self.counter),
            now=now,
            session_id=f"cost-{self.conv['id']}",
            state=state,
            request={"model": self.model, "messages": prefix},
            budget=budget,
            cache=facts,
        )
        started = time.perf_counter()
        outcome = pipeline.run(ctx)
        ms = (time.perf_counter() - started) * 1000
        report: dict[str, Any] = dict(outcome.report)
        return outcome.messages, report, ms, redact_state(outcome.state, state)

    def _run_protocol(
        self,
        pipeline: Pipeline,
        body: dict[str, Any],
        now: float,
        budget: int,
        state: SessionState,
        facts: CacheFacts,
    ) -> tuple[dict[str, Any], dict[str, Any], float, SessionState]:
        """``body`` (the protocol's) as ``Engine.rewrite`` rewrites it: lowered by the adapter,
        the pipeline, the edits lifted back, the lift described (the final integrity check).
        The time includes lowering and lifting."""
        adapter = self.adapter
        assert adapter is not None
        started = time.perf_counter()
        lowered = adapter.lower(body)
        ctx = Context(
            messages=lowered.messages,
            original_messages=lowered.messages,
            model=self.model,
            tokens=RequestTokens(self.counter),
            now=now,
            session_id=f"cost-{self.conv['id']}",
            state=state,
            tools=lowered.tools,
            request=body,
            budget=budget,
            cache=facts,
        )
        outcome = pipeline.run(ctx)
        report: dict[str, Any] = dict(outcome.report)
        forwarded = adapter.lift(body, lowered, outcome.messages)
        describe_lift(adapter, body, forwarded, lowered, report, ctx.tokens)  # type: ignore[arg-type]
        ms = (time.perf_counter() - started) * 1000
        return forwarded, report, ms, redact_state(outcome.state, state)

    def _account(
        self,
        lane: Lane,
        prefix: Any,
        view: list[Message],
        out: Any,
        report: dict[str, Any] | None,
        ms: float | None,
        now: float,
        facts: tuple[set[tuple[str, str]], dict[str, Any] | None, set[str] | None, bool, set[int]],
        checked: dict[int, tuple[dict[str, float | None], bool, list[Message]]],
    ) -> None:
        """Send ``out`` through the lane's cache and add up what it cost and kept. ``facts``:
        the input's violations, its evidence (None: input chain invalid), its call ids (envelope
        mode), whether it is the conversation's last request, the ids of the client's messages.
        Another protocol: ``prefix`` is the client's body, ``view`` its chat view, ``out`` the
        body forwarded, sent to the cache as serialised in the protocol (``wire_parts``) and
        checked on its chat view."""
        before, items, calls, last, client = facts
        s = lane.stats
        wire = out if self.adapter is None else wire_parts(self.protocol, out)
        use = lane.cache.send(self.segments.of(wire), now)
        lane.last_use, lane.last_at = use, now
        s.requests += 1
        s.prompt += use.prompt_tokens
        s.cached += use.cached_tokens
        s.written += use.write_tokens
        if report is not None:
            s.compactions += bool((report.get("prune") or {}).get("compacted"))
            s.rule_errors += len(report.get("rule_errors") or [])
            s.integrity_repairs += any(
                w.get("kind") == "integrity_repair" for w in report.get("warnings") or []
            )
        if ms is not None:
            s.ms.append(ms)
        # lanes sharing a run share its output: check it once
        known = checked.get(id(out))
        if known is None:
            out_view = out if self.adapter is None else self._out_view(prefix, view, out)
            broken = out is not prefix and bool(_signatures(out_view, self.checks) - before)
            if self.adapter is not None and out is not prefix:
                broken = broken or self._wire_broken(prefix, out, report)
            evidence: dict[str, float | None] = {}
            if items is not None:
                aside = without_injected(out_view, client)
                if self.protocol == "anthropic":
                    aside = [_one_text_block(m) for m in aside]
                evidence = kept(items, aside)
            known = checked[id(out)] = (evidence, broken, out_view)
        evidence, broken, out_view = known
        s.broken += broken
        for key, value in evidence.items():
            if value is not None:
                acc = s.evidence.setdefault(key, [0.0, 0.0])
                acc[0] += value
                acc[1] += 1
        if calls is not None:
            present = {call_id(c) for m in out_view for c in tool_calls(m)}
            n, k = len(calls), len(calls & present)
            s.calls += n
            s.calls_kept += k
            if last:
                s.last_calls, s.last_calls_kept = n, k

    def _out_view(self, body: dict[str, Any], view: list[Message], out: Any) -> list[Message]:
        assert self.adapter is not None
        return view if out is body else chat_view(self.adapter, out)

    def _wire_broken(
        self, body: dict[str, Any], out: dict[str, Any], report: dict[str, Any] | None
    ) -> bool:
        """The forwarded body fails its protocol's own check where the client's passed it (or
        the report says the final integrity check fired)."""
        if report is not None and report.get("integrity"):
            return True
        check = _WIRE_CHECKS[self.protocol]
        return bool(check(out)) and not check(body)


def replay_job(job: Job) -> Outcome:
    """A worker's task: one conversation, every method."""
    return Replay(job).run()


# ---------------------------------------------------------------- the run


def spread(items: list[Any], limit: int | None) -> list[Any]:
    """``limit`` items spread evenly over ``items`` (all of them for None or 0)."""
    if not limit or limit >= len(items):
        return items
    return [items[i * len(items) // limit] for i in range(limit)]


def run_jobs(jobs: list[Job], workers: int) -> Iterable[Outcome]:
    if workers <= 1:
        return map(replay_job, jobs)
    # fork: the workers inherit the loaded modules (tiktoken, the rules) instead of importing
    context = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else None)
    pool = context.Pool(workers)
    # the longest conversations first, so no worker is left with one at the end
    order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i].conv["messages"]))
    results = pool.imap_unordered(replay_job, [jobs[i] for i in order], chunksize=1)
    pool.close()
    return results


def fmt_ratio(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.3f}"


def fmt_share(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.1%}"


def main(argv: list[str] | None = None) -> int:
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
        "--protocol",
        choices=PROTOCOLS,
        default="chat",
        help="replay as this protocol: each request converted (bench.protocol_convert), rewritten "
        "through its adapter, the forwarded body serialised in the protocol (default chat)",
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
        default=",".join(PRICES),
        help="price variants, comma-separated: 0.1 (r = 0.1), 0.1w (the same with Anthropic's "
        "1.25× writes), 0.5 (r = 0.5); a ctxproxy method runs once per variant",
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
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    started = time.perf_counter()

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
        twins = [
            Method(f"{m.name}-no-{'+'.join(off)}", m.kind, m.budget, m.rules_off + off)
            for m in methods
            if m.kind == "ctxproxy"
        ]
        methods += twins
    known_rules = {r.name for r in Settings().configured_rules()}
    for m in methods:
        unknown = set(m.rules_off) - known_rules
        if unknown:
            parser.error(f"{m.name}: unknown rules {sorted(unknown)}")

    corpus = list(iter_conversations())
    chosen = spread(corpus, args.limit)
    try:
        pricings = tuple(PRICES[k.strip()] for k in args.prices.split(",") if k.strip())
    except KeyError as exc:
        parser.error(f"unknown price variant {exc}; known: {', '.join(PRICES)}")
    if not pricings:
        parser.error("--prices: at least one")
    jobs = [Job(c, tuple(methods), pricings, args.seed, protocol=args.protocol) for c in chosen]
    if args.envelope_sessions:
        counters = _counters()
        sizes = sorted(
            (
                (counters.for_model(model_of(c)).count_messages(c["messages"]), i)
                for i, c in enumerate(corpus)
            ),
            reverse=True,
        )[: args.envelope_sessions]
        ctx_methods = [m for m in methods if m.kind == "ctxproxy" and m.budget is None]
        for size, i in sizes:
            budget = max(256, int(size * ENVELOPE_SHARE))
            env = [Method("direct", "direct")] + [
                Method(m.name.replace("defaults", "budget 30%"), "ctxproxy", budget, m.rules_off)
                for m in ctx_methods
            ]
            jobs.append(
                Job(corpus[i], tuple(env), pricings[:1], args.seed, True, protocol=args.protocol)
            )

    totals: dict[tuple[str, str], Stats] = {}
    envelopes: list[Outcome] = []
    requests = user_turns = idle = shared = split = 0
    for n, outcome in enumerate(run_jobs(jobs, args.jobs), 1):
        if sys.stderr.isatty():
            print(f"\r{n}/{len(jobs)} conversations", end="", file=sys.stderr, flush=True)
        if outcome.envelope:
            envelopes.append(outcome)
            continue
        requests += outcome.requests
        user_turns += outcome.user_turns
        idle += outcome.idle_over_ttl
        shared += outcome.shared_runs
        split += outcome.split_runs
        for key, s in outcome.stats.items():
            totals.setdefault(key, Stats()).merge(s)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    seconds = time.perf_counter() - started

    rows = table_rows(methods, pricings, totals)
    print(
        ("" if chat else f"protocol {args.protocol}: ")
        + f"{len(chosen)} conversations, {requests:,} requests, {user_turns} user turns "
        f"({idle} after an idle gap over the {TTL_S:.0f} s TTL), seed {args.seed}, "
        f"{seconds:.0f} s on {args.jobs} worker(s)\n"
    )
    print_main(rows, pricings)
    if len(pricings) > 1:
        print(
            f"\nprice variants: {shared:,} ctxproxy requests shared one run (no rule had read the "
            f"prices yet), {split:,} ran once per variant"
            + (" (each variant's figures: --json)" if split else "")
        )
    errors = {m: s.rule_errors for (m, _), s in totals.items() if s.rule_errors}
    repairs = {m: s.integrity_repairs for (m, _), s in totals.items() if s.integrity_repairs}
    if errors:
        print(f"\nrule errors (skipped, as the server does): {errors}")
    if repairs:
        print(f"\nintegrity repairs (a rule broke the chain, the runner repaired it): {repairs}")
    env_rows = envelope_rows(envelopes, pricings[0])
    if env_rows:
        print(
            f"\nTool-call envelopes at a budget of {ENVELOPE_SHARE:.0%} of the session's size "
            f"(the {len(envelopes)} longest conversations; {pricings[0].name}):\n"
        )
        print_envelopes(env_rows, pricings[0])
    if args.json:
        lanes = {f"{m}|{p}": lane_json(s) for (m, p), s in totals.items()}
        data = {
            "conversations": len(chosen),
            "requests": requests,
            "user_turns": user_turns,
            "idle_over_ttl": idle,
            "seed": args.seed,
            "seconds": round(seconds, 1),
            "rows": rows,
            "lanes": lanes,
            "envelopes": env_rows,
            "shared_runs": shared,
            "split_runs": split,
        }
        if not chat:
            data["protocol"] = args.protocol
        with open(args.json, "wb") as f:
            f.write(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    return 0


def lane_json(s: Stats) -> dict[str, Any]:
    out = {
        k: getattr(s, k)
        for k in (
            "requests",
            "prompt",
            "cached",
            "written",
            "compactions",
            "broken",
            "rule_errors",
            "integrity_repairs",
        )
    }
    out["evidence"] = {k: s.share(k) for k in s.evidence}
    return out


def table_rows(
    methods: list[Method], pricings: tuple[Pricing, ...], totals: dict[tuple[str, str], Stats]
) -> list[dict[str, Any]]:
    """One row per method; the non-cost columns of a ctxproxy method are its first price
    variant's run."""
    direct = totals[("direct", "")]
    rows = []
    for m in methods:
        per_price = {
            p.name: totals.get((m.name, p.name if m.kind == "ctxproxy" else "")) for p in pricings
        }
        main = per_price[pricings[0].name]
        if main is None:
            continue
        ms = sorted(main.ms)
        rows.append(
            {
                "method": m.name,
                "cost": {
                    p.name: s.cost(p) / direct.cost(p)
                    for p in pricings
                    if (s := per_price[p.name]) is not None
                },
                "tokens": main.prompt / direct.prompt,
                "hit": main.cached / main.prompt if main.prompt else float("nan"),
                "compactions": main.compactions if m.kind in ("ctxproxy", "microcompact") else None,
                "failure": main.share("failure"),
                "first_user": main.share("first_user"),
                "files": main.share("files"),
                "broken": main.broken,
                "requests": main.requests,
                "ms_mean": statistics.fmean(ms) if ms else None,
                "ms_p50": statistics.median(ms) if ms else None,
            }
        )
    return rows


def print_main(rows: list[dict[str, Any]], pricings: tuple[Pricing, ...]) -> None:
    heads = [p.name for p in pricings]
    print(
        "| method | " + " | ".join(f"cost {h}" for h in heads) + " | tokens forwarded "
        "| cache hit | compactions | latest failure kept | first user kept "
        "| latest writes kept | broken chains | pipeline ms mean / p50 |"
    )
    print("|---|" + "---:|" * (len(heads) + 8))
    for r in rows:
        costs = " | ".join(fmt_ratio(r["cost"].get(h, float("nan"))) for h in heads)
        comp = "—" if r["compactions"] is None else f"{r['compactions']:,}"
        ms = "—" if r["ms_mean"] is None else f"{r['ms_mean']:.2f} / {r['ms_p50']:.2f}"
        print(
            f"| {r['method']} | {costs} | {fmt_share(r['tokens'])} | {fmt_share(r['hit'])} "
            f"| {comp} | {fmt_share(r['failure'])} | {fmt_share(r['first_user'])} "
            f"| {fmt_share(r['files'])} | {r['broken']} | {ms} |"
        )


def envelope_rows(outcomes: list[Outcome], pricing: Pricing) -> list[dict[str, Any]]:
    """Per conversation (longest first) and ctxproxy method: the share of tool calls whose
    envelope is forwarded, over every request's calls and at the last request."""
    rows = []
    for o in sorted(outcomes, key=lambda o: -o.full_tokens):
        direct = o.stats[("direct", "")]
        for (name, _), s in o.stats.items():
            if name == "direct":
                continue
            rows.append(
                {
                    "conversation": o.conv_id,
                    "method": name,
                    "requests": o.requests,
                    "tokens": o.full_tokens,
                    "budget": int(o.full_tokens * ENVELOPE_SHARE),
                    "calls": s.calls,
                    "kept": s.calls_kept / s.calls if s.calls else float("nan"),
                    "last_kept": s.last_calls_kept / s.last_calls if s.last_calls else float("nan"),
                    "last_calls": s.last_calls,
                    "compactions": s.compactions,
                    "cost": s.cost(pricing) / direct.cost(pricing),
                    "tokens_forwarded": s.prompt / direct.prompt,
                }
            )
    return rows


def print_envelopes(rows: list[dict[str, Any]], pricing: Pricing) -> None:
    print(
        "| conversation | method | requests | full size | budget "
        "| envelopes kept, all requests (of call × request) | at the last request (of calls) "
        f"| compactions | tokens forwarded | cost {pricing.name} |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['conversation']} | {r['method']} | {r['requests']:,} | {r['tokens']:,} "
            f"| {r['budget']:,} | {fmt_share(r['kept'])} of {r['calls']:,} "
            f"| {fmt_share(r['last_kept'])} of {r['last_calls']:,} | {r['compactions']} "
            f"| {fmt_share(r['tokens_forwarded'])} | {fmt_ratio(r['cost'])} |"
        )


if __name__ == "__main__":
    sys.exit(main())
