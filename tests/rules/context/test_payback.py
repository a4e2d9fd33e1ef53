"""prune's warm-cache schedule on the session's expected remaining requests (``payback``): the
verdicts, the survival estimate, and the worst-case bound the guard gives whatever the estimate."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from rules.base import CacheFacts
from rules.context import payback
from tests.rules.context import test_schedule
from tests.rules.context.test_schedule import conversation


def decide(*args: Any, **options: Any) -> Any:
    """test_schedule's ``decide`` with prune's ``bet_on_length`` on."""
    return test_schedule.decide(*args, bet_on_length=True, **options)


def test_a_cut_paid_in_hindsight_is_made_whatever_the_estimate() -> None:
    assert payback.verdict(carried=100.0, future=0.0, price=100.0) == "paid"


def test_a_cut_on_the_estimate_waits_for_the_guard_and_the_margin() -> None:
    price = 100.0
    big = payback.MARGIN * price
    assert payback.verdict(payback.GUARD * price, big, price) == "expected"
    assert payback.verdict(payback.GUARD * price - 1, 1e9, price) is None  # the guard
    assert payback.verdict(payback.GUARD * price, big - 1, price) is None  # the margin


def test_the_estimate_is_what_most_sessions_that_got_this_far_reach() -> None:
    table = [10, 20, 30, 40, 50, 60, 70, 80]
    # past 25: 30 … 80; a share SURE of them reach at least the length at (1 - SURE) of them
    longer = [x for x in table if x > 25]
    expected = longer[int((1 - payback.SURE) * len(longer))] - 25
    assert payback.remaining(25, table) == expected
    assert payback.remaining(5, table) > payback.remaining(45, table) > 0
    assert payback.remaining(100, table) == 100.0  # past the longest: as long again


def test_the_survival_table_is_read_from_the_pack_learned_on_the_train_half() -> None:
    from rules.packs import load_pack

    pack = load_pack("survival")
    assert pack["half"] == "train" and len(pack["lengths"]) == 40
    assert payback.remaining(1) > payback.remaining(60) > 0


@pytest.mark.parametrize("carry", [1.0, 7.0, 33.0, 250.0])
def test_the_guard_bounds_the_worst_case_whatever_the_estimate(carry: float) -> None:
    """One cut: carrying it costs ``carry`` a request, removing it ``price`` once. Whatever the
    estimate says (here: always that it pays) and wherever the session ends, the online rule
    costs at most (1 + GUARD) / GUARD times the best schedule's (carry to the end, or cut at
    once)."""
    price = 1_000.0
    bound = (1 + payback.GUARD) / payback.GUARD
    for end in range(1, 400):
        carried, online = 0.0, None
        for _ in range(end):
            if payback.verdict(carried, future=1e12, price=price) is not None:
                online = carried + price
                break
            carried += carry
        cost = online if online is not None else carried
        best = min(carry * end, price)
        assert cost <= bound * best + 1e-9


def test_without_the_estimate_it_is_break_even() -> None:
    """No future: a cut is made exactly once carrying has cost its price (the ski-rental rule,
    at most twice the best)."""
    for carried, price in itertools.product([0.0, 50.0, 99.0, 100.0, 150.0], [100.0]):
        made = payback.verdict(carried, future=0.0, price=price) is not None
        assert made == (carried >= price)


def test_a_long_session_compacts_on_the_estimate_before_break_even() -> None:
    """Warm, under the budget: carrying has cost more than the guard's share of the cut's price
    but not all of it. Early in a session (many requests expected) the cut is made; the same
    session past the longest the survival table knows, with the estimate its own length, too;
    with the carrying below the guard, never."""
    messages = conversation(28)
    budget = 200_000
    plain = decide(messages, budget, 5.0).report["prune"]["schedule"]
    price = plain["bust_cost"] + plain["expected_loss"]
    for requests in (8, 20):
        early = decide(
            messages,
            budget,
            5.0,
            requests=requests,
            carried={"carried": price * 0.6, "looked": requests, "due": requests},
        ).report["prune"]
        assert early["schedule"]["decision"] == "expected" and early["compacted"]
        assert early["schedule"]["ahead"] == pytest.approx(payback.remaining(requests), abs=0.1)
    low = decide(
        messages,
        budget,
        5.0,
        requests=20,
        carried={"carried": price * 0.4, "looked": 20, "due": 20},
    ).report["prune"]
    assert low["schedule"]["decision"] == "none" and not low["compacted"]


def test_a_session_the_estimate_says_is_ending_waits_for_break_even() -> None:
    """The same cut at a cached price so low that the tokens it frees would not repay its price
    over the expected remaining requests: no bet, whatever the guard."""
    messages = conversation(28)
    budget = 200_000
    cheap = CacheFacts(read_ratio=0.001)
    plain = decide(messages, budget, 5.0, cheap).report["prune"]["schedule"]
    price = plain["bust_cost"] + plain["expected_loss"]
    out = decide(
        messages,
        budget,
        5.0,
        cheap,
        requests=20,
        carried={"carried": price * 0.9, "looked": 20, "due": 20},
    ).report["prune"]
    assert out["schedule"]["decision"] == "none" and not out["compacted"]


def test_a_cut_on_the_estimate_leaves_superseded_reads_to_break_even() -> None:
    """A superseded read is priced at no loss (``loss_weights.supersede: 0``): a cut on the
    estimate leaves it for break-even (taken early, the agent's later copies from it were
    lost), while a cut paid for in hindsight takes it with the rest."""
    from tests.rules.context.test_schedule import step

    messages = [*conversation(28), *step(0)]  # g0.py read again: its first read is stale
    budget = 200_000
    plain = decide(messages, budget, 5.0).report["prune"]["schedule"]
    price = plain["bust_cost"] + plain["expected_loss"]

    def actions(carried: float) -> tuple[str, set[str]]:
        out = decide(
            messages,
            budget,
            5.0,
            requests=20,
            carried={"carried": carried, "looked": 20, "due": 20},
        ).report
        return out["prune"]["schedule"]["decision"], {d["action"] for d in out["pruning"]}

    decision, done = actions(price * 0.6)
    assert decision == "expected" and done and "supersede" not in done
    decision, done = actions(price * 3)
    assert decision == "paid" and "supersede" in done


def test_without_bet_on_length_a_half_paid_cut_waits_for_break_even() -> None:
    """Without ``bet_on_length`` (the default) the same half-paid cut waits, and the figures
    carry no estimate."""
    messages = conversation(28)
    budget = 200_000
    plain = test_schedule.decide(messages, budget, 5.0).report["prune"]["schedule"]
    price = plain["bust_cost"] + plain["expected_loss"]
    half = {"carried": price * 0.6, "looked": 20, "due": 20}
    off = test_schedule.decide(messages, budget, 5.0, requests=20, carried=half).report["prune"]
    assert off["schedule"]["decision"] == "none" and "ahead" not in off["schedule"]
    on = decide(messages, budget, 5.0, requests=20, carried=half).report["prune"]
    assert on["schedule"]["decision"] == "expected"
