"""Bets paid from winnings (prune's ``bet_budget_share``, ``risk_budget``): the session's ledger,
the bound it gives (bets never bring the accounted saving below ``−ε`` of the bill, beyond what
break-even's own cuts risk), and the option through prune."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from rules.base import CacheFacts
from rules.context import payback, prune, risk_budget
from rules.context.cut_price import provider_scale
from rules.context.session_memory import Memory
from tests.rules.context import test_schedule
from tests.rules.context.test_schedule import conversation


def test_the_ledger_credits_the_carrying_a_cut_avoids_and_charges_its_price() -> None:
    ledger = risk_budget.Ledger()
    # a request of 1,000 tokens, the previous one 800: 800 read at r, 200 written at w
    ledger = risk_budget.advance(ledger, 0.1, 1.25, previous=800, arrived=1_000)
    assert ledger == risk_budget.Ledger(0.0, 0, 0.1 * 800 + 1.25 * 200)
    # a cut freeing 600 tokens at a price of 90: charged at once, credited from the next request
    ledger = risk_budget.advance(ledger, 0.1, 1.25, 1_000, 1_100, cut=(600, 90.0))
    assert ledger.won == pytest.approx(-90.0) and ledger.rate == 600
    ledger = risk_budget.advance(ledger, 0.1, 1.25, 500, 600)
    assert ledger.won == pytest.approx(-90.0 + 0.1 * 600)
    assert risk_budget.allowance(ledger, 0.02) == pytest.approx(ledger.won + 0.02 * ledger.billed)
    assert risk_budget.load(risk_budget.dump(ledger)) == pytest.approx(ledger)


@pytest.mark.parametrize("share", [0.0, 0.02, 0.1])
def test_bets_never_bring_the_ledger_below_the_share_of_the_bill(share: float) -> None:
    """Random sessions: every request may offer a bet (made only when its price fits the
    allowance) or a cut paid at break-even (made whatever the ledger). At every request, the
    ledger is at least ``−share × billed`` less the prices of the paid cuts since the last bet,
    whatever the session's length; and the bound is reached (it is not vacuous)."""
    rng = random.Random(7)
    closest = 0.0
    for _ in range(300):
        ledger, paid_since = risk_budget.Ledger(), 0.0
        r = rng.choice([0.1, 0.25, 0.5])
        tokens = 0
        for _ in range(rng.randint(1, 60)):
            previous, tokens = tokens, tokens + rng.randint(100, 3_000)
            cut = None
            price = rng.uniform(10, 20_000)
            freed = rng.randint(0, tokens)
            if rng.random() < 0.3 and price <= risk_budget.allowance(ledger, share):
                cut, paid_since = (freed, price), 0.0  # a bet
            elif rng.random() < 0.05:
                cut, paid_since = (freed, price), paid_since + price  # break-even's own
            ledger = risk_budget.advance(ledger, r, 1.0, previous, tokens, cut)
            tokens -= freed if cut else 0
            floor = -share * ledger.billed - paid_since
            assert ledger.won >= floor - 1e-6
            if paid_since == 0 and ledger.billed > 0:
                closest = min(closest, ledger.won / ledger.billed)
    if share > 0:
        assert closest < -share / 2  # some bet spent most of what it was allowed


def decide(*args: Any, **options: Any) -> Any:
    """test_schedule's ``decide`` with bets paid from winnings on."""
    return test_schedule.decide(*args, **options)


def _price() -> float:
    messages = conversation(28)
    plain = test_schedule.decide(messages, 200_000, 5.0).report["prune"]["schedule"]
    return float(plain["bust_cost"] + plain["expected_loss"])


def test_a_bet_is_made_only_when_its_price_fits_the_risk_budget() -> None:
    """A cut far from break-even (a tenth of its price carried, below ``bet_on_length``'s guard)
    that the estimate says pays: with no winnings and a share of 0 it waits; with winnings
    covering its price it is made, and the session's ledger is charged its price."""
    messages = conversation(28)
    price = _price()
    carried = {"carried": price * 0.1, "looked": 20, "due": 20}
    broke = decide(
        messages, 200_000, 5.0, requests=20, carried=carried, bet_budget_share=0.0
    ).report["prune"]
    assert broke["schedule"]["decision"] == "none" and not broke["compacted"]
    assert broke["schedule"]["risk"] == 0.0
    rich = {**carried, "won": price * 1.5, "won_rate": 100, "billed": 50_000.0}
    out = decide(messages, 200_000, 5.0, requests=20, carried=rich, bet_budget_share=0.0)
    report = out.report["prune"]
    assert report["schedule"]["decision"] == "expected" and report["compacted"]
    assert report["schedule"]["price"] == pytest.approx(price, rel=0.05)
    # the bet needs its whole price: winnings a little short of it, that cut is not made (a
    # smaller one whose price fits may be)
    short = {**rich, "won": report["schedule"]["price"] * 0.95}
    other = decide(messages, 200_000, 5.0, requests=20, carried=short, bet_budget_share=0.0)
    figures = other.report["prune"]["schedule"]
    assert figures.get("freed") != report["schedule"]["freed"]
    assert figures["decision"] == "none" or figures["price"] <= short["won"]
    kept = out.state.get(prune.SESSION)
    # charged its price, credited the carrying earlier cuts avoided on this request
    won = price * 1.5 + 0.1 * 100 - report["schedule"]["price"]
    assert kept["won"] == pytest.approx(won, abs=0.1)  # the dump's rounding
    assert kept["won_rate"] == 100 + report["schedule"]["freed"]
    assert kept["billed"] > 50_000.0


def test_the_share_of_the_bill_funds_a_bet_without_winnings() -> None:
    messages = conversation(28)
    price = _price()
    carried = {"carried": price * 0.1, "looked": 20, "due": 20, "billed": 10 * price}
    low = decide(messages, 200_000, 5.0, requests=20, carried=carried, bet_budget_share=0.05)
    assert low.report["prune"]["schedule"]["decision"] == "none"
    high = decide(messages, 200_000, 5.0, requests=20, carried=carried, bet_budget_share=0.2)
    assert high.report["prune"]["schedule"]["decision"] == "expected"


def test_a_session_the_estimate_says_is_ending_does_not_bet_whatever_its_winnings() -> None:
    messages = conversation(28)
    cheap = CacheFacts(read_ratio=0.001)
    rich = {"carried": 0.0, "looked": 20, "due": 20, "won": 1e9}
    out = decide(messages, 200_000, 5.0, cheap, requests=20, carried=rich, bet_budget_share=0.0)
    assert out.report["prune"]["schedule"]["decision"] == "none"
    assert payback.MARGIN > 1  # the estimate must still say it repays its price twice


def test_without_either_share_no_ledger_is_kept_nor_bet_made() -> None:
    messages = conversation(28)
    price = _price()
    rich = {"carried": price * 0.1, "looked": 20, "due": 20, "won": price * 10}
    out = test_schedule.decide(messages, 200_000, 5.0, requests=20, carried=rich)
    assert out.report["prune"]["schedule"]["decision"] == "none"
    assert "risk" not in out.report["prune"]["schedule"]
    kept = out.state.get(prune.SESSION)
    assert "billed" not in kept and "won_rate" not in kept


def test_a_cut_paid_at_break_even_is_charged_its_price_through_prune() -> None:
    messages = conversation(28)
    price = _price()
    carried = {"carried": price * 1.2, "looked": 20, "due": 20, "billed": 1_000.0}
    out = decide(messages, 200_000, 5.0, requests=20, carried=carried, bet_budget_share=0.0)
    report = out.report["prune"]
    assert report["schedule"]["decision"] == "paid" and report["compacted"]
    kept = out.state.get(prune.SESSION)
    assert kept["won"] == pytest.approx(-report["schedule"]["price"], abs=0.1)
    assert kept["won_rate"] == report["schedule"]["freed"] > 0


def test_what_earlier_cuts_freed_stops_earning_when_the_client_drops_messages() -> None:
    """A request with fewer tokens than the last one forwarded (a restart, a rewind): the
    tokens the earlier cuts freed are carried in no world any more, so they earn nothing."""
    ledger = risk_budget.advance(risk_budget.Ledger(), 0.1, 1.0, 1_000, 5_000, cut=(3_000, 200.0))
    grown = risk_budget.advance(ledger, 0.1, 1.0, previous=2_000, arrived=2_500)
    assert grown.won == pytest.approx(-200.0 + 0.1 * 3_000) and grown.rate == 3_000
    restarted = risk_budget.advance(ledger, 0.1, 1.0, previous=2_000, arrived=700)
    assert restarted.won == pytest.approx(-200.0) and restarted.rate == 0
    later = risk_budget.advance(restarted, 0.1, 1.0, previous=700, arrived=900)
    assert later.won == pytest.approx(-200.0)


def test_a_compaction_the_budget_forces_ends_what_earlier_cuts_earn() -> None:
    ledger = risk_budget.Ledger(won=-50.0, rate=4_000, billed=10_000.0)
    forced = risk_budget.advance(ledger, 0.1, 1.0, 9_000, 9_500, forced=True)
    assert forced.won == pytest.approx(-50.0) and forced.rate == 0
    info: dict[str, Any] = {"compacted": True, "schedule": {"decision": "forced"}}
    kept = risk_budget.settle(ledger, CacheFacts(read_ratio=0.1), Memory(last_tokens=9_000), 9_500,
                              info)  # fmt: skip
    assert kept is not None and kept["won"] == -50.0 and kept["won_rate"] == 0


def test_the_bill_is_kept_in_the_provider_s_tokens_as_a_cut_s_price_is() -> None:
    """A wire the provider counts at 1.5 tokens a counted one (tool schemas, call metadata) bills
    1.5 times the rule's count; a cut's price weighs its bust so, so the bill does too: the share
    of it a cut may risk is the same on every wire."""
    ledger, seen = risk_budget.Ledger(), Memory(last_at=100.0, last_tokens=1_000)
    plain = risk_budget.settle(ledger, CacheFacts(read_ratio=0.1), seen, 1_200, {})
    assert plain is not None and plain["billed"] == pytest.approx(0.1 * 1_000 + 1.0 * 200)
    facts = CacheFacts(read_ratio=0.1, last_at=100.0, last_prompt_tokens=1_500)
    heavy = risk_budget.settle(ledger, facts, seen, 1_200, {})
    assert heavy is not None and heavy["billed"] == pytest.approx(1.5 * plain["billed"])
    assert provider_scale(facts, seen) == 1.5  # as the price's bust is weighed
    # a provider counting less than the rule never shrinks the bill
    light = replace(facts, last_prompt_tokens=700)
    assert risk_budget.settle(ledger, light, seen, 1_200, {}) == plain
    # the provider's count of another request (the last one's answer failed): not this scale
    other = replace(facts, last_at=90.0, last_prompt_tokens=3_000)
    assert risk_budget.settle(ledger, other, seen, 1_200, {}) == plain
    assert provider_scale(other, seen) == 1.0


def test_a_kept_memory_that_is_not_a_mapping_reads_as_no_ledger() -> None:
    assert risk_budget.load(None) == risk_budget.load([1, 2]) == risk_budget.Ledger()
