"""What ``bench.optimal`` needs of one conversation, from prune's own planner, and its figures
per ctxproxy method (budget) and price variant, for ``bench.cost``'s offline-optimal table.

The only use of prune's internals: ``Run(ctx, cfg, "prune")`` on each request's Context with an
empty state, ``cap_new_results()`` and ``sizes()`` (a result's size as prune caps it when it first
appears), and ``plan(sizes, drops=False)`` (the supersede, mask and shrink steps eligible then)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.cache_emulator import Pricing
from bench.cost_stats import OptimalFigures
from bench.optimal import Inputs, direct_cost, optimal_schedule
from proxy.settings import Settings
from proxy.tokens import RequestTokens
from rules.base import Context, Message, SessionState
from rules.context.prune_plan import Run

ELIDING = ("supersede", "mask", "shrink")
_CONFIG: list[Any] = []  # prune's configured options, once per process ([None]: prune is off)


def _prune_config() -> Any:
    if not _CONFIG:
        found = [r.config for r in Settings().configured_rules() if r.name == "prune"]
        _CONFIG.append(found[0] if found else None)
    return _CONFIG[0]


def plan_inputs(prefixes: Sequence[list[Message]], counter: Any, cfg: Any) -> Inputs:
    """Each request through the planner (see the module docstring)."""
    full = prefixes[-1]
    raw = [counter.count_message(m) for m in full]
    sizes = list(raw)
    seen = 0
    eligible: list[dict[int, int]] = []
    for prefix in prefixes:
        ctx = Context(
            messages=prefix,
            original_messages=prefix,
            model="",
            tokens=RequestTokens(counter),
            now=0.0,
            session_id="optimal",
            state=SessionState(),
            request={"messages": prefix},
        )
        run = Run(ctx, cfg, "prune")
        run.cap_new_results()
        now = run.sizes()
        for i in range(seen, len(prefix)):  # a message's size when it first appears (sticky)
            sizes[i] = now[i]
        seen = max(seen, len(prefix))
        steps = run.plan(now, drops=False)
        eligible.append({s.first: s.freed for s in steps if s.stage in ELIDING})
    return Inputs(sizes, [len(p) for p in prefixes], eligible, raw)


def optimal_figures(
    prefixes: Sequence[list[Message]],
    counter: Any,
    budgets: Mapping[str, int],
    pricings: Sequence[Pricing],
) -> dict[tuple[str, str], OptimalFigures]:
    """Per ctxproxy method (its budget) and price variant: direct's cost and the optimal
    schedule's, in the analytic model (empty when prune is not configured)."""
    cfg = _prune_config()
    if cfg is None or not prefixes or not budgets:
        return {}
    inputs = plan_inputs(prefixes, counter, cfg)
    out = {}
    for p in pricings:
        r, w = p.read_ratio, p.write_ratio
        direct = direct_cost(inputs.raw_sizes or inputs.sizes, inputs.lengths, r, w)
        for name, budget in budgets.items():
            best = optimal_schedule(inputs, r, w, budget)
            out[(name, p.name)] = OptimalFigures(direct, best.cost, len(best.compactions))
    return out
