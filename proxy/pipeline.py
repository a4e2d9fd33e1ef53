"""The runner: applies the configured rules in order, timing each, containing their errors, then
runs the final integrity check and computes prefix reuse. Shared by the server and ``rewrite``."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from proxy.settings import ConfiguredRule
from rules import chain_validator
from rules.base import Context, Messages, SessionState
from rules.registry import load_rule

PREFIX_NAMESPACE = "_prefix"  # hashes and sizes of the previous forwarded request's messages


class RuleFailed(RuntimeError):
    """A rule raised while the pipeline runs in strict mode (``on_rule_error: fail``)."""


@dataclass(frozen=True)
class PipelineOutcome:
    messages: Messages
    state: SessionState
    report: dict[str, Any]


@dataclass(frozen=True)
class _Step:
    name: str
    module: ModuleType
    config: Any


def merge_report(report: dict[str, Any], fragment: dict[str, Any]) -> None:
    for key, value in fragment.items():
        if isinstance(value, list) and isinstance(report.get(key), list):
            report[key].extend(value)
        else:
            report[key] = value


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

    @property
    def rule_names(self) -> list[str]:
        return [s.name for s in self.steps]

    def run(self, ctx: Context) -> PipelineOutcome:
        report: dict[str, Any] = {
            "session": ctx.session_id,
            "repairs": [],
            "pruning": [],
            "entities": [],
            "references": [],
            "warnings": [],
            "rule_errors": [],
            "timings_ms": {},
        }
        tokens_before = ctx.tokens.count_messages(ctx.original_messages)
        ctx = ctx.evolve(report=report)  # the one report dict, filled in as the rules run
        for step in self.steps:
            started = time.perf_counter()
            try:
                result = step.module.apply(ctx, step.config)
            except Exception as exc:  # contained per rule: the input stands, the error is reported
                if self.on_rule_error == "fail":
                    raise RuleFailed(
                        f"rule {step.name} raised {type(exc).__name__}: {exc}"
                    ) from exc
                report["rule_errors"].append(
                    {"rule": step.name, "error": f"{type(exc).__name__}: {exc}"}
                )
                result = None
            report["timings_ms"][step.name] = round((time.perf_counter() - started) * 1000, 3)
            if result is not None:
                merge_report(report, result.report)
                if result.messages is not ctx.messages or result.state is not ctx.state:
                    ctx = ctx.evolve(messages=result.messages, state=result.state)

        messages = self._integrity_check(ctx.messages, report, ctx.table(chain_validator.MEMO))
        tokens_after = ctx.tokens.count_messages(messages)
        report["tokens"] = {"before": tokens_before, "after": tokens_after, "budget": ctx.budget}
        state = self._record_prefix(ctx, messages, report, tokens_after)
        return PipelineOutcome(messages, state, report)

    def _integrity_check(
        self,
        messages: Messages,
        report: dict[str, Any],
        memo: dict[int, tuple[Any, Any]] | None = None,
    ) -> Messages:
        """The same validator the tests use; a violation here is a bug in a rule, so repair it.
        ``memo``: the request's validator table, so messages checked by ``repair_tool_chain``
        (the same objects) are not checked again, only the ones a rule replaced or added."""
        started = time.perf_counter()
        violations = chain_validator.find_violations(messages, memo)
        if violations:
            from rules.repair_tool_chain import repair_messages

            messages, repairs = repair_messages(messages, memo=memo)
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
        ctx: Context, messages: Messages, report: dict[str, Any], tokens: int | None = None
    ) -> SessionState:
        """prefix_reuse: share of the tokens that repeat the last request's prefix. ``tokens``:
        ``count_messages(messages)`` when already known (the messages' sizes plus the 3 tokens
        that prime the reply, as both counters define it)."""
        hash_of = ctx.hash_of
        hashes = [hash_of(m) for m in messages]
        previous = ctx.state.get(PREFIX_NAMESPACE) or {}
        prev_hashes: list[str] = previous.get("hashes", [])
        shared = 0
        for mine, theirs in zip(hashes, prev_hashes, strict=False):
            if mine != theirs:
                break
            shared += 1
        reuse = None
        if prev_hashes:
            count = ctx.tokens.count_messages
            total = (count(messages) if tokens is None else tokens) - 3
            if total:
                reuse = round((count(messages[:shared]) - 3) / total, 4)
        report["prefix_reuse"] = reuse
        report["prefix_shared_messages"] = shared
        return ctx.state.with_value(PREFIX_NAMESPACE, {"hashes": hashes})
