"""bench/optimal_replay.py: the oracle compacts a warm session under its budget exactly where it
is told and nowhere else, and puts prune's own schedule back; bench/split.py's halves."""

from __future__ import annotations

import pytest

from bench.cost_config import Job, parse_variant
from bench.optimal_replay import conversation, oracle, replay_cost
from bench.split import HALVES, half_of, in_half
from rules.context import prune, schedule
from tests.support.replay_jobs import every_turn_job
from tests.support.traces import iter_conversations

CONV = "bookminder/day-012/s0"


@pytest.fixture(scope="module")
def job() -> Job:
    return every_turn_job(CONV)


def test_the_oracle_compacts_where_told_and_nowhere_else(job: Job) -> None:
    direct, none_cost, none_made = replay_cost(job, [])
    assert none_made == 0  # warm, under the budget: only where told
    row = conversation(job)
    assert row.compactions >= 1
    assert row.replay_direct == pytest.approx(direct)
    # what the optimal's schedule saves in the replay differs from the analytic model's figure,
    # and both are savings against direct
    assert row.replay_optimal < none_cost
    assert row.analytic_optimal < row.analytic_direct


def test_the_oracle_puts_prunes_schedule_back() -> None:
    choose, look = schedule.choose, prune.WARM_LOOK_EVERY
    with oracle([3]):
        assert schedule.choose is not choose and prune.WARM_LOOK_EVERY == 1
    assert schedule.choose is choose and look == prune.WARM_LOOK_EVERY


@pytest.mark.needs_shared
def test_the_halves_split_the_corpus_by_the_id_alone() -> None:
    corpus = list(iter_conversations())
    halves = {h: in_half(corpus, h) for h in HALVES}
    assert all(halves.values())
    assert sum(len(v) for v in halves.values()) == len(corpus)
    assert all(half_of(c["id"]) == h for h, v in halves.items() for c in v)
    assert half_of("x") == half_of("x") and in_half(corpus, "all") == corpus
    with pytest.raises(ValueError):
        in_half(corpus, "other")


@pytest.mark.needs_shared
def test_the_survival_pack_is_the_train_halfs_lengths() -> None:
    """The pack prune's warm schedule reads is what ``bench.survival`` makes of the train half
    (rewritten with ``--write`` when the corpus changes), never of the held-out one."""
    from bench.survival import PACK, lengths, render

    assert PACK.read_text() == render(lengths("train"), "train")
    assert render(lengths("held-out"), "held-out") != PACK.read_text()


def test_a_bet_variant_turns_prunes_option_on_and_nothing_else() -> None:
    from bench.cost_lanes import _pipeline

    bet, plain = parse_variant("defaults+bet"), parse_variant("defaults")
    assert bet.bet and bet.kind == "ctxproxy" and bet.budget is None and not plain.bet
    assert parse_variant("budget32k+bet").budget == 32_000
    on, off = _pipeline((), True), _pipeline((), False)
    configs = {s.name: s.config for s in on.steps}
    assert configs["prune"].bet_on_length is True  # type: ignore[attr-defined]
    assert not {s.name: s.config for s in off.steps}["prune"].bet_on_length  # type: ignore[attr-defined]
    assert [s.name for s in on.steps] == [s.name for s in off.steps]
    assert all(s.config == configs[s.name] for s in off.steps if s.name != "prune")
