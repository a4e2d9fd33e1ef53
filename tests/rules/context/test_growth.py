"""The session's growth per request is measured from each request as it arrived (the previous
cuts replayed), so a session the budget compacts from its first request on gets one: the growth
that sizes a forced cut's goal and the hold's reason is the client's, not absent."""

from __future__ import annotations

import itertools
from typing import Any

from rules.context import schedule
from tests.rules.context.test_thrash import _compactions, _floor_session, _held, _replay, _step
from tests.support.factories import TOKENS


def _resumed(window_room: int | None) -> tuple[list[dict[str, Any]], int, int]:
    """The low-room floor session with steps of ~370 tokens, its first request arriving with 8
    of them at once (a resumed conversation already over the budget): the floor plus one step
    is over the budget, so every request is over it. Prune's reports, the budget and the tokens
    one step adds."""
    _, budget, task = _floor_session(450)
    steps = [_step(k, 60, parts=1) for k in range(30)]
    resumed = [[m for step in steps[:8] for m in step], *steps[8:]]
    growth = TOKENS.count_messages(steps[8])
    return _replay(resumed, budget, task=task, window_room=window_room), budget, growth


def test_a_session_cut_on_every_request_gets_its_growth_measured() -> None:
    # with no window known nothing is held: the budget cuts each request it is over
    reports, _, growth = _resumed(window_room=None)
    cuts = _compactions(reports)
    assert cuts[:6] == list(range(6))  # compacted on each of its first requests
    # from the third request on, the schedule sizes the goal by the growth measured on the
    # second (cut as well: the session had none), within 5% of what the client adds per request
    for r in reports[2:6]:
        assert abs(r["schedule"]["growth"] - growth) <= 0.05 * growth


def test_a_session_cut_from_its_first_request_is_held_by_its_measured_growth() -> None:
    # the window known: cut on its first request, then held until 5 requests after; from the
    # third on, the hold's figures use the growth measured between the held requests
    reports, budget, growth = _resumed(window_room=120_000)
    held = _held(reports)
    assert held[:4] == [1, 2, 3, 4]
    assert reports[1]["schedule"]["held"] == "spacing"  # no growth measured yet
    for r in reports[2:5]:
        fig = r["schedule"]
        assert fig["held"] == "floor" and abs(fig["growth"] - growth) <= 0.05 * growth
        assert fig["deepest"] <= budget < fig["deepest"] + schedule.HEADROOM * fig["growth"]
    cuts = _compactions(reports)
    assert cuts[0] == 0 and len(cuts) >= 5
    assert all(b - a == schedule.HEADROOM for a, b in itertools.pairwise(cuts))
