"""A budget below what every request must carry. When even the deepest cut prune can make (every
step: the older turns dropped, results elided; the schedule's ``deepest``) leaves the request over
the budget, the budget is below the request's floor: the system prompt, the tools schema and the
messages prune keeps whatever the budget (the latest turns, the task, a file's latest write). A
Claude Code session (its system prompt and tools alone some 16,000 tokens) run with a budget of
20,000 is over it on every request, and each request's ``over_budget`` warning said only that.

So the first such request of a session (again when the budget changes) carries a
``budget_below_floor`` warning in its report naming both numbers and the floor's parts, and the
request log line says it (``proxy.telemetry.jsonlog``); the forwarded bytes do not change. Which
budget was told is kept in the session's state (``NAMESPACE``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rules.base import Context, Message, SessionState
from rules.report import ReportWarning

NAMESPACE = "prune_floor"
KIND = "budget_below_floor"


def floor_warning(
    ctx: Context,
    figures: Any,
    view: Sequence[Message],
    tools: int,
    blocks: int,
    budget: int | None,
) -> ReportWarning | None:
    """The warning when the schedule's deepest cut (``figures["deepest"]``) is over ``budget``
    and this session was not yet told of this budget; else None."""
    deepest = figures.get("deepest") if isinstance(figures, dict) else None
    if budget is None or not isinstance(deepest, int) or deepest <= budget:
        return None
    if was_told(ctx.state, budget):
        return None
    system = sum(ctx.tokens.count_message(m) for m in view if m.get("role") == "system")
    protected = max(deepest - system - tools - blocks, 0)
    note = (
        f"the token budget ({budget}) is below what every request of this session must carry "
        f"({deepest}: system prompt {system}, tools schema {tools}, messages kept whatever the "
        f"budget {protected}"
        + (f", injected context {blocks}" if blocks else "")
        + f"); every request will be over it. Raise the budget above {deepest}."
    )
    return {
        "kind": KIND,
        "budget": budget,
        "floor": deepest,
        "system": system,
        "tools": tools,
        "protected": protected,
        "note": note,
    }


def told(state: SessionState, budget: int) -> SessionState:
    """``state`` remembering that the session was told its floor is above ``budget``."""
    return state.with_value(NAMESPACE, {"budget": budget})


def was_told(state: SessionState, budget: Any) -> bool:
    """Whether the session was told its floor is above ``budget`` (its later requests over that
    budget are not news: the engine logs them at DEBUG)."""
    told = state.get(NAMESPACE)
    return isinstance(told, dict) and told.get("budget") == budget
