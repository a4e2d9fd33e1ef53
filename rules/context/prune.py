"""prune: task-aware pruning under the token budget, sticky through the overlay.

Every request: a tool result over ``max_result_tokens`` is capped when it first appears (head and
tail kept). Only when the request (messages and tools schema) leaves less than ``reserve_tokens``
under the budget (room for inject's tail block), one compaction prunes down to the target
(``target_ratio`` of the budget) in stages, cheapest first: supersede, mask, drop turns. Earlier
edits are replayed byte-for-byte, so the forwarded prefix stays the same between compactions and
the provider's prompt cache keeps hitting. Calls are never split from results; protected evidence
(rules/evidence.py) is never elided. Provider-owned state is left alone.
"""

from __future__ import annotations

from pydantic import Field

from rules.activity.observations import Observation, of_context
from rules.base import Context, Message, RuleConfig, RuleResult
from rules.context import evidence, inject, overlay, prune_stages
from rules.messages import role
from rules.report import PruneSummary, Pruning, Report

NAMESPACE = "prune"
VERBATIM = ("latest failing test output", "latest build error", "latest error")


class Config(RuleConfig):
    max_result_tokens: int = Field(
        default=8_000,
        ge=100,
        description="a larger tool result is capped when it first appears",
    )
    max_evidence_tokens: int = Field(
        default=32_000,
        ge=100,
        description="the latest failure stays whole up to this size",
    )
    target_ratio: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="over the budget, one compaction prunes down to this share of it",
    )
    min_gain_ratio: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="a compaction runs only if it frees this share of the budget (or makes the "
        "request fit)",
    )
    min_gain_tokens: int | None = Field(
        default=None,
        ge=0,
        description="absolute minimum gain, in tokens; when set, wins over `min_gain_ratio`",
    )
    keep_last_observations: int = Field(
        default=10,
        ge=0,
        description="the mask stage keeps the last M tool results whole",
    )
    keep_last_writes: int = Field(
        default=3, ge=0, description="the last N write results are protected as evidence"
    )
    drop_turns: bool = Field(default=True, description="last resort: drop whole oldest turns")
    # inject runs after prune; the default is inject's own cap
    reserve_tokens: int = Field(
        default=inject.Config.model_fields["max_tokens"].default,
        ge=0,
        description="room kept free under the budget for inject's tail block: a compaction "
        "starts once less is left (never more than the budget minus the target)",
    )


def provider_owned(ctx: Context) -> str | None:
    """Why the provider owns this conversation's state (then nothing is pruned), or None."""
    if ctx.request.get("previous_response_id"):
        return "previous_response_id"
    for m in ctx.messages:  # each message, then its content parts
        if m.get("type") == "compaction" or "encrypted_content" in m:
            return "provider compaction item"
        parts = m.get("content")
        if isinstance(parts, list):
            for item in parts:
                if isinstance(item, dict) and (
                    item.get("type") == "compaction" or "encrypted_content" in item
                ):
                    return "provider compaction item"
    return None


class _Run:
    """One request's pruning: the overlay being built, sizes per message, decisions made."""

    def __init__(self, ctx: Context, cfg: Config) -> None:
        self.ctx, self.cfg, self.tokens = ctx, cfg, ctx.tokens
        self.messages = ctx.messages
        self.anchors = overlay.anchors(self.messages, ctx.hash_of)
        # Applied again to its own output, the edited messages' anchors are gone: the stored
        # overlay still stands (it is what made them), so it is kept whole (idempotence).
        own_output = any(overlay.is_rendered(m) for m in self.messages)
        self.overlay = overlay.Overlay.load(
            ctx.state.get(NAMESPACE), set(self.anchors), keep_all=own_output
        )
        self.obs: list[Observation] = of_context(ctx)
        self.by_result = {o.result_index: o for o in self.obs}
        self.decisions: list[Pruning] = []
        self.stages: dict[str, int] = {}
        self._evidence: evidence.Evidence | None = None

    @property
    def evidence(self) -> evidence.Evidence:
        if self._evidence is None:
            self._evidence = evidence.find(self.messages, self.obs, self.cfg.keep_last_writes)
        return self._evidence

    def render(self, ov: overlay.Overlay) -> list[Message]:
        return overlay.render(
            self.messages, self.anchors, ov, self.by_result, self.tokens, self.cfg.max_result_tokens
        )

    def _decide(self, ov: overlay.Overlay, i: int, action: str, reason: str, freed: int) -> None:
        ov.edits[self.anchors[i]] = {"action": action, "reason": reason}
        obs = self.by_result.get(i)
        self.decisions.append(
            {
                "index": i,
                "tool_call_id": obs.call_id if obs else self.messages[i].get("tool_call_id"),
                "action": action,
                "reason": reason,
                "tokens_freed": freed,
            }
        )
        self.stages[action] = self.stages.get(action, 0) + freed

    def cap_new_results(self) -> None:
        """Cap oversized results the first time they are seen; the decision is remembered."""
        dropped = set(self.overlay.dropped)
        edits, limit = self.overlay.edits, self.cfg.max_result_tokens
        count = self.tokens.count_message
        for i, m in enumerate(self.messages):
            if role(m) != "tool":
                continue
            a = self.anchors[i]
            if a in edits or a in dropped:
                continue
            size = count(m)
            if size <= limit:
                continue
            why = self.evidence.protected.get(i)
            if why in VERBATIM and size <= self.cfg.max_evidence_tokens:
                self.overlay.edits[a] = {"action": "keep", "reason": why}
                continue
            edit = {"action": "cap", "reason": f"over {self.cfg.max_result_tokens:,} tokens"}
            capped = overlay.apply_edit(m, edit, None, self.tokens, self.cfg.max_result_tokens)
            self._decide(
                self.overlay, i, "cap", edit["reason"], size - self.tokens.count_message(capped)
            )

    def compact(self, total: int, target: int, fixed: int) -> tuple[overlay.Overlay, int]:
        """One jump down to the target: a new overlay and its exact size (plus ``fixed``, the
        tools schema's tokens, which ``total`` includes as well)."""
        cfg, ev = self.cfg, self.evidence
        protected = set(ev.protected)
        trial = overlay.Overlay(
            dict(self.overlay.edits), list(self.overlay.dropped), self.overlay.compactions + 1
        )
        dropped = set(trial.dropped)
        sizes = {i: self.tokens.count_message(m) for i, m in enumerate(self.messages)}
        for i, a in enumerate(self.anchors):
            if a in trial.edits:
                sizes[i] = self.tokens.count_message(self._edited(i, trial.edits[a]))
        candidates = (
            ("supersede", prune_stages.supersede(self.obs, protected, self.messages)),
            ("mask", prune_stages.mask(self.obs, protected, cfg.keep_last_observations)),
        )
        for stage, items in candidates:
            for i, reason in items:
                if total <= target and stage != "supersede":  # stale copies go in any case
                    break
                a = self.anchors[i]
                if a in dropped or trial.edits.get(a, {}).get("action") in overlay.ELIDE_ACTIONS:
                    continue
                new_size = self.tokens.count_message(
                    self._edited(i, {"action": stage, "reason": reason})
                )
                freed = sizes[i] - new_size
                if freed > 0:
                    self._decide(trial, i, stage, reason, freed)
                    sizes[i], total = new_size, total - freed
        if total > target and cfg.drop_turns:
            total = self._drop(trial, sizes, total, target, protected)
        view = self.render(trial)
        return trial, self.tokens.count_messages(view) + fixed

    def _drop(
        self,
        trial: overlay.Overlay,
        sizes: dict[int, int],
        total: int,
        target: int,
        protected: set[int],
    ) -> int:
        results: dict[str, list[int]] = {}
        for i, m in enumerate(self.messages):
            if role(m) == "tool" and isinstance(m.get("tool_call_id"), str):
                results.setdefault(m["tool_call_id"], []).append(i)
        dropped = set(trial.dropped)
        # Oldest first, but turns holding the latest write of a file last: they say what changed.
        latest_writes: dict[str, int] = {}
        for o in self.obs:
            if o.action.kind == "write":
                latest_writes[o.action.target] = o.call_index
        keep_late = set(latest_writes.values())
        ordered = sorted(
            prune_stages.turns(self.messages, self.evidence.first_user),
            key=lambda turn: turn[0] in keep_late,
        )
        for turn in ordered:
            if total <= target:
                break
            if any(self.anchors[i] in dropped for i in turn):
                continue
            if not prune_stages.droppable(turn, self.messages, protected, results):
                continue
            freed = sum(sizes[i] for i in turn)
            dropped.update(self.anchors[i] for i in turn)
            total -= freed
            self.decisions.append(
                {
                    "index": turn[0],
                    "tool_call_id": None,
                    "action": "drop",
                    "reason": f"dropped {len(turn)} messages to fit the budget",
                    "tokens_freed": freed,
                }
            )
            self.stages["drop"] = self.stages.get("drop", 0) + freed
        trial.dropped = [a for a in self.anchors if a in dropped]
        return total

    def _edited(self, i: int, edit: dict[str, str]) -> Message:
        return overlay.apply_edit(
            self.messages[i], edit, self.by_result.get(i), self.tokens, self.cfg.max_result_tokens
        )


def apply(ctx: Context, cfg: Config) -> RuleResult:
    owned = provider_owned(ctx)
    if owned:
        return RuleResult.unchanged(ctx, {"prune": {"skipped": owned}})
    run = _Run(ctx, cfg)
    run.cap_new_results()
    view = run.render(run.overlay)
    schema = ctx.tokens.count_tools(ctx.tools)  # sent with every request: counts against it
    total = ctx.tokens.count_messages(view) + schema
    budget = ctx.budget
    info: PruneSummary = {"budget": budget, "compacted": False}
    if schema:
        info["tools_tokens"] = schema
    target = room = 0
    if budget is not None:
        target = int(budget * cfg.target_ratio)
        room = budget - min(cfg.reserve_tokens, budget - target)  # the rest is inject's
    if budget is not None and total > room:
        min_gain = (
            cfg.min_gain_tokens
            if cfg.min_gain_tokens is not None
            else int(budget * cfg.min_gain_ratio)
        )
        kept_decisions, kept_stages = list(run.decisions), dict(run.stages)
        trial, trial_total = run.compact(total, target, schema)
        if trial_total <= room or total - trial_total >= min_gain:
            run.overlay, view, total = trial, run.render(trial), trial_total
            info["compacted"] = True
        else:  # not worth breaking the prompt cache for so little
            run.decisions, run.stages = kept_decisions, kept_stages
        info.update({"target": target, "min_gain": min_gain, "reserve": budget - room})
    over = budget is not None and total > budget
    info.update(
        {
            "stages": run.stages,
            "tokens_after": total,
            "over_budget": over,
            "compactions": run.overlay.compactions,
            "edits": len(run.overlay.edits),
            "dropped": len(run.overlay.dropped),
        }
    )
    report: Report = {"prune": info, "pruning": run.decisions}
    if over:
        report["warnings"] = [{"kind": "over_budget", "tokens": total, "budget": budget}]
    new_state = run.overlay.to_json()
    stored = ctx.state.get(NAMESPACE)
    state = (
        ctx.state
        if stored == new_state
        or (stored is None and not any(new_state[k] for k in ("edits", "dropped")))
        else ctx.state.with_value(NAMESPACE, new_state)
    )
    unchanged = all(a is b for a, b in zip(view, ctx.messages, strict=False))
    if len(view) == len(ctx.messages) and unchanged:
        return RuleResult(ctx.messages, state, report)
    return RuleResult(view, state, report)
