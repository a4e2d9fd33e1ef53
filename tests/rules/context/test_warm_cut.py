"""The warm cut (``rules/context/warm_cut.py``): a paid cut taken deeper when the steps before it
would pay within ``HEADROOM`` requests (one bust instead of two), and the next look's due
request (``look_in``): no cut of a look pays at its price before it."""

from __future__ import annotations

from typing import Any

import pytest

from rules.base import CacheFacts
from rules.context import carrying, payback, schedule

FACTS = CacheFacts(read_ratio=0.1, min_prefix_tokens=1024)
SIZES = [1000, 7000] + [1000] * 8  # a large stale result at message 1, a small one at 8
PREFIX = [sum(SIZES[:i]) for i in range(len(SIZES) + 1)]


def _choose(steps: dict[int, list[float]], total: int, requests: int) -> schedule.Choice:
    live = [
        schedule.Step("mask", int(f), i, (i,), carried=c) for i, (f, c) in sorted(steps.items())
    ]
    memory = schedule.Memory(requests=requests, last_tokens=total)
    return schedule.choose(
        live, PREFIX, total, 200_000, 150_000, FACTS, memory, "warm", {"mask": 1.0}, 0
    )


def _session(early_carried: float, requests: int = 12) -> tuple[list[tuple[int, str]], float]:
    """A warm session with no growth, looked at every request: the tail's result has carried
    600 and pays its small cut at request 4; the early large one carries 600 a request. The
    cuts made (request, decision) and the cost: busts plus carrying."""
    steps = {1: [6000.0, early_carried], 8: [900.0, 600.0]}
    total, cost, cuts = PREFIX[-1], 0.0, []
    for k in range(requests):
        choice = _choose(steps, total, 20 + k)
        if choice.steps:
            cuts.append((k, str(choice.figures["decision"])))
            cost += choice.figures["bust_cost"]
            order = sorted(steps)
            for first in [order[i] for i in choice.chosen or ()]:
                total -= int(steps.pop(first)[0])
        for figures in steps.values():  # carrying what is left, this request
            figures[1] += 0.1 * figures[0]
            cost += 0.1 * figures[0]
    return cuts, cost


def test_a_paid_tail_cut_takes_the_steps_that_would_pay_within_five_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break-even alone cuts the tail at request 4 and the early result two requests later,
    re-billing the prompt twice within 5 requests (thrash); taken deeper at once, one bust, and
    the session costs less."""
    cuts, cost = _session(4000.0)
    assert cuts == [(4, "soon")]
    monkeypatch.setattr(payback, "soon", lambda *args: False)  # break-even alone
    twice, dearer = _session(4000.0)
    assert [k for k, _ in twice] == [4, 6] and all(why == "paid" for _, why in twice)
    assert cost < dearer


def test_a_deeper_cut_waits_while_it_has_carried_less_than_half_its_price() -> None:
    """The bound of a cut made early (at most 3x the best, whatever the session's length) needs
    it to have carried ``GUARD`` of its price: far from it, the tail alone is cut."""
    cuts, _ = _session(0.0, requests=5)
    assert cuts == [(4, "paid")]
    assert payback.soon(50.0, 60.0, 100.0) and not payback.soon(49.0, 100.0, 100.0)
    assert not payback.soon(60.0, 30.0, 100.0)


def _look_in(steps: dict[int, list[float]]) -> Any:
    return _choose(steps, PREFIX[-1], 20).figures.get("look_in")


def test_the_next_look_is_due_when_some_cut_could_pay_at_its_price() -> None:
    """``look_in``: the requests until the first cut of this look would pay at the price it has
    now, its steps carrying what they free each request; none sooner."""
    steps = {1: [6000.0, 0.0], 8: [900.0, 300.0]}
    due = _look_in(steps)
    assert isinstance(due, int) and due > 1
    # the tail's cut (price 900) pays first: (900 - 300) / (0.1 × 900) requests
    assert due == carrying.due(300.0, 900, 900.0, 0.1) == 7
    for k in range(1, due + 1):
        later = {i: [f, c + 0.1 * f * k] for i, (f, c) in steps.items()}
        decision = _choose(later, PREFIX[-1], 20 + k).figures["decision"]
        assert (decision != "none") == (k == due)
    assert carrying.due(0.0, 0, 10.0, 0.1) > 1_000_000  # frees nothing: never
