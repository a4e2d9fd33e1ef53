"""``warm_risk_share``'s wait on every warm path of ``schedule.choose``: the deeper cut
(``soon``) and a bet on the session's length are held by the guard as break-even's own cut is;
a cut made is never priced above the guard (``test_warm_risk.py`` checks the ledger's
arithmetic; these, the rule's wait)."""

from __future__ import annotations

from rules.context import schedule
from tests.rules.context.test_warm_cut import FACTS, PREFIX


def _choose(
    steps: dict[int, list[float]], requests: int, guard: float | None, risk: float | None = None
) -> schedule.Choice:
    live = [
        schedule.Step("mask", int(f), i, (i,), carried=c) for i, (f, c) in sorted(steps.items())
    ]
    memory = schedule.Memory(requests=requests, last_tokens=PREFIX[-1])
    return schedule.choose(
        live, PREFIX, PREFIX[-1], 200_000, 150_000, FACTS, memory, "warm", {"mask": 1.0}, 0,
        risk=risk, guard=guard,
    )  # fmt: skip


def test_the_deeper_cut_waits_for_the_guard_and_the_tail_cut_that_fits_is_made() -> None:
    steps = {1: [6000.0, 4000.0 + 0.1 * 6000 * 4], 8: [900.0, 600.0 + 0.1 * 900 * 4]}
    free = _choose(steps, 24, guard=1e9)
    assert free.figures["decision"] == "soon"
    tail = _choose({8: steps[8]}, 24, guard=1e9)
    guard = (tail.figures["price"] + free.figures["price"]) / 2
    held = _choose(steps, 24, guard=guard)
    assert held.steps > 0 and held.figures["price"] <= guard  # the tail cut, not the deep one


def test_a_bet_waits_for_the_guard() -> None:
    steps = {1: [6000.0, 0.0], 8: [900.0, 0.0]}  # nothing carried yet: only a bet would cut
    assert _choose(steps, 200, guard=None, risk=1e9).figures["decision"] == "expected"
    price = _choose(steps, 200, guard=1e9, risk=1e9).figures["price"]
    held = _choose(steps, 200, guard=price / 2, risk=1e9)
    assert held.steps == 0 or held.figures["price"] <= price / 2
