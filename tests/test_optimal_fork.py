"""bench/optimal_fork.py: the runs forked from the never-compacting replay give the rows of runs
replayed from the first request; a horizon keeps the optimal's compactions within it; the
programme over precomputed transitions is ``bench.optimal_real``'s, and with a horizon the least
cost of the schedules it allows."""

from __future__ import annotations

import dataclasses
import itertools
import os

import pytest

from bench import optimal_fork
from bench.cache_emulator import Pricing, Segments
from bench.cost_config import PRICES, Job
from bench.optimal_fork import Runs, collect, in_child, runs_at_prices
from bench.optimal_real import (
    NEVER,
    Track,
    conversation,
    fresh_segments,
    programme,
    runs_of,
    transition,
)
from bench.optimal_replay import HANDED_ON
from tests.support.replay_jobs import every_turn_job
from tests.test_optimal_real import CONV, _bytes_segments, _chain, _synthetic


def test_a_child_s_result_and_its_failure_come_back() -> None:
    parent = os.getpid()
    assert in_child(lambda: (os.getpid() != parent, [1, 2])) == (True, [1, 2])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        in_child(lambda: 1 // 0)
    state = [0]

    def change() -> int:
        state[0] = 5
        return state[0]

    assert in_child(change) == 5 and state == [0]  # the child's writes stay in the child


def _as_runs(tracks: dict[int, Track], seg: Segments, horizon: int | None) -> Runs:
    """``bench.optimal_real``'s runs as ``collect`` hands them to the programme."""
    never = tracks[NEVER]
    n = len(never.uses)
    runs = Runs(list(never.uses))
    usable = [k for k in range(n) if k in tracks and tracks[k].compacted[k]]
    for k in usable:
        end = n if horizon is None else min(n, k + horizon)
        run = tracks[k]
        runs.first[k] = run.uses[k]
        runs.after[k] = run.uses[k + 1 : end]
        before = never.segments[k - 1] if k else None
        runs.into[k] = {
            j: transition(seg, before, run.segments[j - 1], tracks[j].segments[j])
            for j in usable
            if k < j <= min(end, n - 1)
        }
        if end == n:
            runs.ends.add(k)
    return runs


def _allowed(chosen: tuple[int, ...], n: int, horizon: int | None) -> bool:
    if horizon is None or not chosen:
        return True
    gaps = [b - a for a, b in itertools.pairwise(chosen)]
    return all(g <= horizon for g in gaps) and n - chosen[-1] <= horizon


@pytest.mark.parametrize("price", ["0.1", "0.5", "0.1w"])
@pytest.mark.parametrize(("n", "horizon"), [(4, None), (9, None), (9, 3), (12, 4)])
def test_the_programme_is_the_least_cost_chain_its_horizon_allows(
    price: str, n: int, horizon: int | None
) -> None:
    seg, p = _bytes_segments(), PRICES[price]
    tracks = _synthetic(n, seg)
    cost, chosen = optimal_fork.programme(_as_runs(tracks, seg, horizon), p)
    every = [
        (_chain(tracks, s, p, seg), s)
        for size in range(n)
        for s in itertools.combinations(range(2, n), size)
        if _allowed(s, n, horizon)
    ]
    assert cost == pytest.approx(min(c for c, _ in every))
    assert _allowed(chosen, n, horizon)
    assert _chain(tracks, chosen, p, seg) == pytest.approx(cost)
    if horizon is None:
        assert (cost, chosen) == programme(tracks, p, seg)


def test_a_horizon_that_binds_costs_more() -> None:
    """Without one the cheapest schedule here compacts once, early; a horizon of 4 requests
    forces compactions through the session, each re-billing the prompt."""
    seg, p = _bytes_segments(), PRICES["0.5"]
    tracks = _synthetic(12, seg)
    free, chosen = optimal_fork.programme(_as_runs(tracks, seg, None), p)
    bound, held = optimal_fork.programme(_as_runs(tracks, seg, 4), p)
    assert len(chosen) == 1 and len(held) > 1
    assert bound > free


@pytest.fixture(scope="module")
def job() -> Job:
    return every_turn_job(CONV, max_requests=24)


def _solo(job: Job) -> Job:
    return dataclasses.replace(job, methods=job.methods[1:])


def test_the_forked_runs_give_the_rows_of_runs_replayed_from_the_start(job: Job) -> None:
    prices: tuple[Pricing, ...] = (PRICES["0.1"], PRICES["0.5"])
    both = dataclasses.replace(job, pricings=prices)
    handed = HANDED_ON[0]
    forked = conversation(both, fork=True)
    assert HANDED_ON[0] == handed  # under the budget: the runs are shared by the prices
    assert forked == conversation(both)
    assert all(r.schedule for r in forked)  # the comparison is of something
    held = conversation(both, fork=True, horizon=3)
    for free, bound in zip(forked, held, strict=True):
        assert _allowed(tuple(bound.schedule), bound.requests, 3)
        assert bound.optimal >= free.optimal - 1e-6
        assert (bound.online, bound.direct) == (free.online, free.direct)


@pytest.mark.parametrize("horizon", [None, 1, 4])
def test_the_collected_runs_are_the_replayed_runs_within_the_horizon(
    job: Job, horizon: int | None
) -> None:
    """What the children send back is what runs replayed from the start give, transitions and
    ends cut at the horizon."""
    solo = _solo(job)
    seg = fresh_segments(solo)
    tracks = runs_of(job, solo)[job.pricings[0].name]
    assert collect(solo, horizon, fresh_segments(solo))[1] == _as_runs(tracks, seg, horizon)


def test_a_run_prune_s_own_schedule_decided_in_is_collected_at_each_price(job: Job) -> None:
    """Over the budget's trigger the oracle hands the choice on: each price gets its own runs,
    and the rows are those of runs replayed at each price from the start."""
    prices = (PRICES["0.1"], PRICES["0.5"])
    small = dataclasses.replace(
        job,
        methods=(job.methods[0], dataclasses.replace(job.methods[1], budget=9000)),
        pricings=prices,
    )
    runs = runs_at_prices(_solo(small), None, fresh_segments)
    assert runs["r=0.1"] is not runs["r=0.5"] and runs["r=0.1"].handed_on
    rows = conversation(small, fork=True)
    assert rows == conversation(small)
    assert all(r.schedule for r in rows)
