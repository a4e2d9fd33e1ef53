"""The runner: applies the configured rules in order, timing each, containing their errors, then
runs the final integrity check and computes prefix reuse. Shared by the server and ``rewrite``."""

from __future__ import annotations

import operator
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from proxy.rewrite import lineage
from proxy.rewrite.lineage import PREFIX_NAMESPACE
from proxy.rewrite.recall import Recall, Renders, encoding_of
from proxy.rewrite.records import OBJECT_FACTOR, MessageRecords, RenderedMessages
from proxy.rewrite.session_memos import ObjectMemos, SessionMemos
from proxy.settings import ConfiguredRule
from rules import abandon
from rules.base import Context, Messages, SessionState, release_lists
from rules.chain import validator as chain_validator
from rules.registry import load_rule
from rules.report import Report, merge_report, new_report


class RuleFailed(RuntimeError):
    """A rule raised while the pipeline runs in strict mode (``on_rule_error: fail``)."""


@dataclass(frozen=True)
class PipelineOutcome:
    messages: Messages
    state: SessionState
    report: Report
    hashes: list[str]  # each message's content hash (``Context.hash_of``): keys for the adapters
    history: Sequence[str] = ()  # the client's messages' hashes (``lineage.history_hashes``)


@dataclass(frozen=True)
class _Step:
    name: str
    module: ModuleType
    config: Any


class Pipeline:
    def __init__(
        self,
        rules: list[ConfiguredRule],
        on_rule_error: Literal["skip", "fail"] = "skip",
        modules: Mapping[str, Any] | None = None,  # name -> module, for rules outside the registry
    ) -> None:
        modules = modules or {}
        self.steps = [
            _Step(r.name, modules.get(r.name) or load_rule(r.name), r.config) for r in rules
        ]
        self.on_rule_error = on_rule_error
        self.records = MessageRecords()
        self.renders: RenderedMessages | None = RenderedMessages()  # None: render every time
        # each session's per-object memos across its requests (None: made afresh every request)
        self.memos: SessionMemos | None = SessionMemos()

    def memos_of(self, ctx: Context) -> ObjectMemos | None:
        """The per-object memos kept for ``ctx``'s session, if any."""
        return self.memos.peek(ctx.session_id, encoding_of(ctx.tokens)) if self.memos else None

    def forget(self, session: str) -> None:
        """Drop what is kept of ``session``'s messages as objects: its per-object memos, and
        the renderings (shared by every session: one of them may be the object changed)."""
        if self.memos is not None:
            self.memos.forget(session)
        if self.renders is not None:
            self.renders.clear()

    @property
    def rule_names(self) -> list[str]:
        return [s.name for s in self.steps]

    def run(
        self, ctx: Context, serialised: Sequence[bytes | None] | None = None
    ) -> PipelineOutcome:
        """``serialised``: each of ``ctx.original_messages``' bytes with sorted keys where the
        caller knows them (a protocol adapter's kept lowerings), None where not."""
        encoding = encoding_of(ctx.tokens)
        memos = self.memos.take(ctx.session_id, encoding) if self.memos is not None else None
        if memos is not None:
            ctx = memos.attach(ctx)
        recall = Recall(self.records, ctx, serialised, encoding)  # the memos take in messages
        try:
            return self._run(ctx, recall, encoding, memos)
        except BaseException:
            # charged however the run ends (its client gone, a rule failing), else nothing ever
            # lets them go: a tenant hanging up on heavy requests under new session names grew
            # them past the bound, uncharged
            self._settle(ctx, encoding, memos, recall, 2 * len(ctx.original_messages))
            raise

    def _settle(
        self,
        ctx: Context,
        encoding: str | None,
        memos: ObjectMemos | None,
        recall: Recall,
        handled: int,
    ) -> None:
        """The session's memos charged what the request's run took in (``handled`` messages)."""
        if memos is not None and self.memos is not None:
            memos.taken_bytes += OBJECT_FACTOR * recall.taken_bytes
            recall.taken_bytes = 0  # charged once, whatever follows
            self.memos.settle(ctx.session_id, encoding, memos, handled)

    def _run(
        self, ctx: Context, recall: Recall, encoding: str | None, memos: ObjectMemos | None
    ) -> PipelineOutcome:
        report = new_report(ctx.session_id)
        # the state of this request's own branch (``lineage``): its history's hashes are known now
        own = lineage.history_hashes(ctx)
        resumed_state, fork, key = lineage.resume_of(ctx, own)
        if fork is not None:
            report["lineage"] = fork
            ctx = lineage.forked(ctx, resumed_state, own)
        tokens_before = recall.original_tokens
        if tokens_before is None:
            tokens_before = ctx.tokens.count_messages(ctx.original_messages)
        # the one report dict, filled in as the rules run
        renders = Renders(self.renders, recall) if self.renders is not None else None
        ctx = ctx.evolve(report=report, renders=renders)
        timings, clock = report["timings_ms"], time.perf_counter
        try:
            for step in self.steps:
                abandon.check()  # a request whose client went away stops here (in a worker)
                name, started = step.name, clock()
                try:
                    result = step.module.apply(ctx, step.config)
                # contained per rule: the input stands, the error is reported
                except Exception as exc:
                    if self.on_rule_error == "fail":
                        raise RuleFailed(f"rule {name} raised {type(exc).__name__}: {exc}") from exc
                    report["rule_errors"].append(
                        {"rule": name, "error": f"{type(exc).__name__}: {exc}"}
                    )
                    result = None
                # ms to the microsecond (``round(x, 3)`` costs ~0.4 µs a rule)
                timings[name] = int((clock() - started) * 1e6 + 0.5) / 1000
                if result is not None:
                    if result.report:
                        merge_report(report, result.report)
                    if result.messages is not ctx.messages or result.state is not ctx.state:
                        ctx = ctx.evolve(messages=result.messages, state=result.state)
        except abandon.Abandoned:  # nothing of it is kept but what its memos took in (charged)
            release_lists()
            raise

        messages = self._integrity_check(ctx, report)
        tokens_after = ctx.tokens.count_messages(messages)
        report["tokens"] = {"before": tokens_before, "after": tokens_after, "budget": ctx.budget}
        hashes = ctx.hashes_of(messages)
        state = self._record_prefix(ctx, hashes, messages, report, tokens_after)
        state = lineage.record(state, key)
        recall.keep()
        self._settle(ctx, encoding, memos, recall, len(ctx.original_messages) + len(messages))
        release_lists()
        return PipelineOutcome(messages, state, report, hashes, own)

    def _integrity_check(self, ctx: Context, report: Report) -> Messages:
        """The same validator the tests use; a violation here is a bug in a rule, so repair it.
        Through the request's validator table, so messages checked by ``repair_tool_chain``
        (the same objects) are not checked again, only the ones a rule replaced or added; and
        a list of the very messages checked before (``Context.derived``) is not walked again."""
        started = time.perf_counter()
        messages, memo = ctx.messages, ctx.table(chain_validator.MEMO)
        violations = chain_validator.violations_of(ctx)
        if violations:
            from rules.chain.call_ids import rule_named
            from rules.chain.repair_tool_chain import repair_messages

            messages, repairs = repair_messages(messages, memo=memo, rule=rule_named(ctx.call_ids))
            for item in repairs:
                report["repairs"].append(
                    {**item, "kind": "integrity_repair", "cause": item["kind"]}
                )
            report["warnings"].append(
                {
                    "kind": "integrity_repair",
                    "violations": violations[:20],
                    "count": len(violations),
                }
            )
        report["timings_ms"]["integrity_check"] = round((time.perf_counter() - started) * 1000, 3)
        return messages

    @staticmethod
    def _record_prefix(
        ctx: Context,
        hashes: list[str],
        messages: Messages,
        report: Report,
        tokens: int | None = None,
    ) -> SessionState:
        """prefix_reuse: share of the tokens that repeat the last request's prefix (``hashes``:
        the messages'). ``tokens``: ``count_messages(messages)`` when already known (the
        messages' sizes plus the 3 tokens that prime the reply, as both counters define it)."""
        previous = ctx.state.get(PREFIX_NAMESPACE) or {}
        prev_hashes: list[str] = previous.get("hashes", [])
        same = list(map(operator.eq, hashes, prev_hashes))  # stops at the shorter list
        shared = same.index(False) if False in same else len(same)
        reuse = None
        if prev_hashes:
            if tokens is None:
                tokens = ctx.tokens.count_messages(messages)
            total = tokens - 3
            if total:
                # the shared prefix is most of the request: size the rest, message by message
                # (no priming tokens; not a list for the counter to keep)
                rest = sum(map(ctx.tokens.count_message, messages[shared:]))
                reuse = round((total - rest) / total, 4)
        report["prefix_reuse"] = reuse
        report["prefix_shared_messages"] = shared
        return ctx.state.with_value(PREFIX_NAMESPACE, {"hashes": hashes})
