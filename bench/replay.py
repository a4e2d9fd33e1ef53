"""``bench.cost``'s replay: one conversation, request by request on one clock, through every
method; each method (and price variant, for ctxproxy) a lane with its own emulated cache and
session state."""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Iterable, Iterator
from typing import Any

from bench.breakpoint_cache import BreakpointCache, anthropic_blocks, marker_places
from bench.cache_emulator import PrefixCache, Pricing
from bench.cost_config import (
    CLEARED,
    MASK_PLACEHOLDER,
    MIN_PREFIX_TOKENS,
    TTL_S,
    Job,
    Method,
    budget_of,
    model_of,
    timeline,
)
from bench.cost_lanes import Cache, Lane, WatchedFacts, _counters, _pipeline, _segments
from bench.cost_rewrite import (
    _ADAPTERS,
    _WIRE_CHECKS,
    _one_text_block,
    _signatures,
    chat_view,
    convert,
    mask_older,
    wire_parts,
    without_injected,
)
from bench.cost_stats import Outcome
from bench.optimal_inputs import optimal_figures
from bench.pruning import evidence_items, kept
from proxy.protocols.report import describe_lift
from proxy.rewrite.budgets import default_window_room
from proxy.rewrite.pipeline import Pipeline
from proxy.store.redact_state import redact_state
from proxy.tokens import RequestTokens
from rules.base import CacheFacts, Context, Message, SessionState
from rules.messages import call_id, role, tool_calls, with_content
from tests.support.traces import request_prefixes


class Replay:
    """One conversation through every method, request by request, on one clock."""

    # what each request cost only: no chain, evidence or call checks (the optimal's runs)
    costs_only = False

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
        # Anthropic's breakpoint cache reads the markers Claude Code places; the prefix cache
        # reads the body as converted before breakpoints were placed (its figures reproduce)
        self.breakpoints = job.cache == "anthropic"
        self.client_marks: list[tuple[str, int, int]] = []
        if self.breakpoints and job.protocol != "anthropic":
            raise ValueError("the anthropic cache reads a Messages body: --protocol anthropic")
        for method in job.methods:
            if method.kind == "ctxproxy":
                lanes = [self._lane(method, p) for p in job.pricings]
                self.groups[method] = [lanes]
            else:
                self._lane(method, None)

    def _lane(self, method: Method, pricing: Pricing | None) -> Lane:
        cache: Cache
        if self.breakpoints:
            cache = BreakpointCache(self.segments, TTL_S, MIN_PREFIX_TOKENS)
        else:
            cache = PrefixCache(self.segments, TTL_S, MIN_PREFIX_TOKENS)
        lane = Lane(method, pricing, cache)
        self.lanes.append(lane)
        return lane

    def requests(self) -> tuple[list[list[Message]], list[float]]:
        """Each request's messages (the first ``max_requests``) and the time it is sent at."""
        job = self.job
        prefixes = list(request_prefixes(self.conv["messages"]))
        if job.max_requests:
            prefixes = prefixes[: job.max_requests]
        return prefixes, timeline(self.conv["id"], prefixes, job.seed, job.cadence, job.interval)

    def run(self) -> Outcome:
        full = self.conv["messages"]
        job = self.job
        prefixes, times = self.requests()
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
        optimal = {}
        if job.optimal:
            budgets = {m.name: self.budgets[m] for m in self.groups if not m.rules_off}
            optimal = optimal_figures(prefixes, self.counter, budgets, job.pricings)
        return Outcome(
            self.conv["id"],
            stats,
            len(prefixes),
            user_turns,
            idle,
            self.counter.count_messages(prefixes[-1] if prefixes else full),
            self.shared_runs,
            self.split_runs,
            self.job.envelope,
            optimal,
        )

    def step(self, prefix: list[Message], now: float, last: bool) -> None:
        self.segments.next_request()
        # another protocol: the request as its client sends it (what direct forwards), and its
        # chat view, on which the chain and the evidence are checked
        request: Any = prefix
        view = prefix
        if self.adapter is not None:
            request = convert(self.protocol, self.model, prefix, self.breakpoints)
            if self.breakpoints:
                self.client_marks = marker_places(request)
            view = chat_view(self.adapter, request)
        # the validator's checks of the client's messages serve every later request; the rest
        # (rewritten copies, made anew per request) are let go
        client = {id(m) for m in view}
        before: set[tuple[str, str]] = set()
        items: dict[str, Any] | None = None
        calls: set[str] | None = None
        if not self.costs_only:
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
        pipeline = _pipeline(
            method.rules_off,
            method.bet,
            method.restore,
            method.threshold,
            method.floor,
            method.risk,
            method.guard,
        )
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
            window_room=default_window_room(self.model),
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
            window_room=default_window_room(self.model),
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
        if isinstance(lane.cache, BreakpointCache):
            blocks = anthropic_blocks(out)
            use = lane.cache.send(blocks, now)
            # the client's markers must land on the same blocks after the rewrite (inject may
            # append to a marked block: the marker stays on it)
            s.breakpoints_lost += out is not prefix and marker_places(out) != self.client_marks
        else:
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
        if self.costs_only:
            return
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
