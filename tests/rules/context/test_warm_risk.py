"""Every warm cut paid from the risk budget (prune's ``warm_risk_share``, ``risk_budget``): the
bound it gives (the ledger never below ``−ε`` of the bill, break-even's own cuts included,
whatever the session's length), and the option through prune: a cut paid at break-even waits
for the budget, a compaction the budget forces does not."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from rules.base import CacheFacts
from rules.context import prune, risk_budget
from tests.rules.context import test_schedule
from tests.rules.context.test_risk_budget import _price
from tests.rules.context.test_schedule import NOW, conversation
from tests.support.factories import TOKENS


@pytest.mark.parametrize("share", [0.0, 0.01, 0.05])
def test_guarded_cuts_never_bring_the_ledger_below_the_share_of_the_bill(share: float) -> None:
    """Random sessions: every request may offer a warm cut (a bet, one paid at break-even or a
    free one: each made only when its price fits the allowance), or a compaction the budget
    forces (never held, never charged). At every request the ledger is at least ``−share ×
    billed``, with no allowance for break-even's cuts; and the bound is reached."""
    rng = random.Random(28)
    closest = 0.0
    for _ in range(300):
        ledger = risk_budget.Ledger()
        r = rng.choice([0.1, 0.25, 0.5])
        tokens = 0
        for _ in range(rng.randint(1, 80)):
            previous, tokens = tokens, tokens + rng.randint(100, 3_000)
            cut, forced = None, False
            price = rng.choice([0.0, rng.uniform(10, 20_000)])  # a free cut, or one with a bust
            freed = rng.randint(0, tokens)
            roll = rng.random()
            if roll < 0.4 and price <= risk_budget.allowance(ledger, share):
                cut = (freed, price)
            elif roll > 0.97:
                forced = True
            ledger = risk_budget.advance(ledger, r, 1.25, previous, tokens, cut, forced)
            tokens -= freed if cut or forced else 0
            assert ledger.won >= -share * ledger.billed - 1e-6
            if ledger.billed > 0:
                closest = min(closest, ledger.won / ledger.billed)
    if share > 0:
        assert closest < -share / 2  # some cut spent most of what it was allowed


def test_without_the_wait_break_even_s_cuts_break_the_bound() -> None:
    """The bound is the wait's: a cut paid at break-even made whatever the ledger (the
    schedule's own accounting) takes it below ``−ε × billed`` when the session ends after."""
    ledger = risk_budget.advance(risk_budget.Ledger(), 0.1, 1.0, 0, 10_000)
    ledger = risk_budget.advance(ledger, 0.1, 1.0, 10_000, 11_000, cut=(8_000, 900.0))
    assert ledger.won < -0.02 * ledger.billed
    assert risk_budget.allowance(risk_budget.Ledger(0.0, 0, 10_000.0), 0.02) < 900.0


def test_allowances_keep_a_ledger_only_when_a_share_is_set() -> None:
    kept = {"won": 40.0, "won_rate": 10, "billed": 1_000.0}
    assert risk_budget.allowances(kept, None, None) == (None, None, None)
    ledger, bet, cut = risk_budget.allowances(kept, None, 0.02)
    assert ledger == risk_budget.Ledger(40.0, 10, 1_000.0)
    assert bet is None and cut == pytest.approx(60.0)
    _, bet, cut = risk_budget.allowances(kept, 0.1, None)
    assert bet == pytest.approx(140.0) and cut is None


def test_a_cut_paid_at_break_even_waits_until_its_price_fits() -> None:
    """Carrying has paid the cut's price (break-even would make it): with the option on and a
    ledger short of its price it waits; once ``ε ×`` the bill covers it, it is made and the
    ledger charged its price."""
    messages = conversation(28)
    price = _price()
    carried = {"carried": price * 1.2, "looked": 20, "due": 20, "billed": 1_000.0}
    plain = test_schedule.decide(messages, 200_000, 5.0, requests=20, carried=carried)
    assert plain.report["prune"]["schedule"]["decision"] == "paid"  # break-even makes it
    held = test_schedule.decide(
        messages, 200_000, 5.0, requests=20, carried=carried, warm_risk_share=0.02
    ).report["prune"]
    assert held["schedule"]["decision"] == "none" and not held["compacted"]
    assert held["schedule"]["guard"] == pytest.approx(20.0)
    funded = {**carried, "billed": 2 * price / 0.02}
    out = test_schedule.decide(
        messages, 200_000, 5.0, requests=20, carried=funded, warm_risk_share=0.02
    )
    report = out.report["prune"]
    assert report["schedule"]["decision"] == "paid" and report["compacted"]
    kept = out.state.get(prune.SESSION)
    assert kept["won"] == pytest.approx(-report["schedule"]["price"], abs=0.1)
    assert kept["won"] >= -0.02 * kept["billed"]


def test_by_default_a_cut_paid_at_break_even_waits_for_ten_percent_of_the_bill() -> None:
    """The default (``warm_risk_share`` 0.10): with no winnings a cut that has paid for itself
    waits while 10% of the session's bill is short of its price, and is made once it covers it."""
    share = prune.Config().warm_risk_share
    assert share == 0.10
    messages = conversation(28)
    price = _price()
    short = {"carried": price * 1.2, "looked": 20, "due": 20, "billed": 0.8 * price / share}
    context = test_schedule.context_for(messages, 200_000, 5.0, requests=20, carried=short)
    held = prune.apply(context, prune.Config()).report["prune"]
    assert held["schedule"]["decision"] == "none" and not held["compacted"]
    covered = {**short, "billed": 1.25 * price / share}
    context = test_schedule.context_for(messages, 200_000, 5.0, requests=20, carried=covered)
    made = prune.apply(context, prune.Config()).report["prune"]
    assert made["schedule"]["decision"] == "paid" and made["compacted"]


def test_winnings_of_earlier_cuts_fund_a_cut_paid_at_break_even() -> None:
    messages = conversation(28)
    price = _price()
    carried = {"carried": price * 1.2, "looked": 20, "due": 20, "billed": 1_000.0}
    rich = {**carried, "won": price * 1.1, "won_rate": 0}
    out = test_schedule.decide(
        messages, 200_000, 5.0, requests=20, carried=rich, warm_risk_share=0.0
    )
    assert out.report["prune"]["schedule"]["decision"] == "paid"


def test_a_compaction_the_budget_forces_is_never_held() -> None:
    from tests.support.factories import TOKENS

    messages = conversation(14)
    budget = int(TOKENS.count_messages(messages) * 0.6)
    broke = {"won": -1e9, "billed": 1.0}
    out = test_schedule.decide(
        messages, budget, 5.0, CacheFacts(), carried=broke, warm_risk_share=0.0
    )
    info = out.report["prune"]
    assert info["schedule"]["decision"] == "forced" and info["compacted"]
    assert info["tokens_after"] <= budget
    kept = out.state.get(prune.SESSION)
    assert kept["won"] == pytest.approx(-1e9) and kept["won_rate"] == 0  # not charged


def test_the_wait_weighs_the_bill_and_a_cut_s_price_by_the_same_scale() -> None:
    """Through prune: the provider counting twice the rule's tokens doubles both what a cut's bust
    is priced at (``provider_scale`` in the figures) and what the ledger bills the request; a
    count of another request (its last_at not the one prune saw) scales neither."""
    messages = conversation(28)
    size = TOKENS.count_messages(messages)
    kept = {"carried": 1.0, "looked": 20, "due": 20, "billed": 1_000.0}
    facts = CacheFacts(last_at=NOW - 5, last_prompt_tokens=2 * size, last_cached_tokens=size)
    for seen, scale in ((facts, 2.0), (replace(facts, last_at=NOW - 50), 1.0)):
        context = test_schedule.context_for(messages, 200_000, 5.0, seen, carried=kept)
        out = prune.apply(context, prune.Config())
        assert out.report["prune"]["schedule"]["provider_scale"] == scale
        billed = out.state.get(prune.SESSION)["billed"]
        # the same messages again: all of the previous request read at r, nothing new
        assert billed == pytest.approx(1_000.0 + scale * 0.1 * size, abs=0.1)
