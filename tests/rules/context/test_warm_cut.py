"""The warm cut (``rules/context/warm_cut.py``): a paid cut taken deeper when the steps before it
would pay within ``HEADROOM`` requests (one bust instead of two), and the next look's due
request (``look_in``): no cut of a look pays at its price before it."""

from __future__ import annotations

from typing import Any

import pytest

from rules.base import CacheFacts
from rules.context import carrying, payback, prune, schedule, warm_cut
from tests.rules.context.test_schedule import NOW, conversation, decide, memory
from tests.support.factories import TOKENS, assistant, ctx, result, shell

# break-even alone: the default's wait for the risk budget is test_warm_risk's
BREAK_EVEN = prune.Config(warm_risk_share=None)

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


def test_a_result_at_the_end_of_the_cached_prompt_is_free_to_cut() -> None:
    """The previous prompt held messages 0-9 (10,000 tokens); two new messages follow. Eliding
    message 9 re-bills only what follows it, which is new anyway: free. Eliding message 5
    re-bills messages 6-9 fresh: not."""
    prefix = [1000 * i for i in range(13)]
    memory = schedule.Memory(requests=21, last_tokens=10_000)
    assert warm_cut.free_now([(9, 970)], prefix, 12_000, FACTS, memory)
    assert not warm_cut.free_now([(5, 970)], prefix, 12_000, FACTS, memory)
    assert not warm_cut.free_now([(9, 0)], prefix, 12_000, FACTS, memory)


def _rerun_session(**kept: Any) -> Any:
    """Request 21 (no look due by the count): the agent runs the command of the previous
    request's last result again, so that result is superseded at the end of the cached prompt."""
    body = "\n".join(
        f"FAILED tests/test_{i}.py::test_case - assert {i} == {i + 1}" for i in range(60)
    )
    before = [*conversation(12), assistant(None, shell("t1", "pytest -x")), result("t1", body)]
    messages = [*before, assistant(None, shell("t2", "pytest -x")), result("t2", body + "\nok")]
    state = memory(21, NOW - 5.0, TOKENS.count_messages(before), looked=20, **kept)
    return prune.apply(ctx(messages, now=NOW, state=state, budget=200_000), BREAK_EVEN)


def test_between_looks_a_superseded_result_free_to_cut_is_looked_at_and_cut() -> None:
    out = _rerun_session()
    info = out.report["prune"]
    assert info["compacted"] and info["schedule"]["decision"] == "paid"
    assert info["schedule"]["bust_cost"] == 0
    assert [d["action"] for d in out.report["pruning"]] == ["supersede"]


def test_no_warm_cut_within_five_requests_of_the_last_compaction() -> None:
    """Free or paid, a warm cut waits ``HEADROOM`` requests after the session's last one."""
    held = _rerun_session(last_cut=18).report["prune"]
    assert not held["compacted"] and held["schedule"]["decision"] == "none"
    assert _rerun_session(last_cut=16).report["prune"]["compacted"]
    paid_for = {"carried": 1e9, "looked": 20, "due": 20}
    messages = conversation(120)
    assert decide(messages, 200_000, 5.0, carried=paid_for).report["prune"]["compacted"]
    recent = decide(messages, 200_000, 5.0, carried={**paid_for, "last_cut": 17})
    assert recent.report["prune"]["schedule"]["decision"] == "none"
    memory = schedule.Memory(requests=20, last_cut=-1)
    assert memory.after(1.0, 100, compacted=True, stored=None)["last_cut"] == 20


def test_no_warm_cut_that_the_budget_would_follow_within_five_requests() -> None:
    """A paid cut that leaves the request less than 5 requests of growth under the size the
    budget forces a compaction at is not made."""
    messages = conversation(120)
    size = TOKENS.count_messages(messages)
    paid_for = {"carried": 1e9, "looked": 20, "due": 20}
    roomy = decide(messages, 4 * size, 5.0, growth=50.0, carried=paid_for).report["prune"]
    assert roomy["compacted"]
    after = roomy["tokens_after"]
    # the same cut, a session growing fast enough to reach the budget within 5 requests of it
    growth = (4 * size - after) / 5 + 100
    tight = decide(messages, 4 * size, 5.0, growth=growth, carried=paid_for).report["prune"]
    assert not tight["compacted"] and tight["schedule"]["decision"] == "none"
