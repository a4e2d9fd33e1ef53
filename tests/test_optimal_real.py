"""bench/optimal_real.py: the dynamic programme over replayed runs finds the least-cost chain of
segments (against every schedule enumerated), and on a corpus conversation its schedule,
replayed end to end, costs what the programme says, no more than never compacting or
compacting once anywhere."""

from __future__ import annotations

import dataclasses
import itertools
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from bench.cache_emulator import CacheUse, Pricing, Segments
from bench.cost_config import PRICES, Job
from bench.optimal_real import (
    NEVER,
    Result,
    Track,
    conversation,
    fresh_segments,
    main,
    online_only,
    oracle_tracks,
    programme,
    replay_track,
    runs_of,
    transition,
)
from bench.optimal_replay import HANDED_ON
from rules.context import prune
from tests.support.replay_jobs import every_turn_job

CONV = "bookminder/day-012/s0"


def _bytes_segments() -> Segments:
    return Segments(lambda text: list(text.encode()))  # one token a byte


def _track(requests: list[list[bytes]], seg: Segments, compact_at: int | None) -> Track:
    """A run whose cache uses are those of sending ``requests`` in turn to one cache."""
    from bench.cache_emulator import PrefixCache

    cache = PrefixCache(seg, 300.0, 1024)
    uses = [cache.send(r, float(t)) for t, r in enumerate(requests)]
    return Track(requests, uses, [t == compact_at for t in range(len(requests))])


def _synthetic(n: int, seg: Segments) -> dict[int, Track]:
    """A system prompt, a 3,000-byte result from request 1 on that a compaction at ``k`` (from
    request 2 on: it was cached once) replaces by a 40-byte placeholder (with a marker of ``k``,
    as an injected block would differ), and 400 bytes of growth per request."""
    system, result = b"s" * 1500, b"r" * 3000

    def request(t: int, k: int | None) -> list[bytes]:
        body = [system]
        if t >= 1:
            body.append(result if k is None or t < k else b"p" * 39 + bytes([65 + k % 26]))
        return body + [bytes([97 + i % 26]) * 400 for i in range(t)]

    runs = {NEVER: _track([request(t, None) for t in range(n)], seg, None)}
    for k in range(2, n):
        runs[k] = _track([request(t, k) for t in range(n)], seg, k)
    return runs


def _chain(runs: dict[int, Track], chosen: tuple[int, ...], p: Pricing, seg: Segments) -> float:
    """A schedule's cost as the module docstring defines it, request by request."""
    never = runs[NEVER]
    total, last = 0.0, NEVER
    for t in range(len(never.uses)):
        if t in chosen:
            if last == NEVER:
                use = runs[t].uses[t]
            else:
                before = never.segments[last - 1] if last else None
                use = transition(seg, before, runs[last].segments[t - 1], runs[t].segments[t])
            last = t
        else:
            use = runs[last].uses[t]
        total += p.cost(use)
    return total


@pytest.mark.parametrize("price", ["0.1", "0.5", "0.1w"])
@pytest.mark.parametrize("n", [4, 9])
def test_the_programme_is_the_least_cost_chain_of_all_schedules(price: str, n: int) -> None:
    seg, p = _bytes_segments(), PRICES[price]
    runs = _synthetic(n, seg)
    cost, chosen = programme(runs, p, seg)
    candidates = range(2, n)
    every = [
        (_chain(runs, s, p, seg), s)
        for size in range(n)
        for s in itertools.combinations(candidates, size)
    ]
    least = min(c for c, _ in every)
    assert cost == pytest.approx(least)
    assert _chain(runs, chosen, p, seg) == pytest.approx(cost)


def test_a_long_cheap_read_sequence_compacts_and_a_short_one_does_not() -> None:
    seg = _bytes_segments()
    assert programme(_synthetic(3, seg), PRICES["0.1"], seg)[1] == ()
    cost, chosen = programme(_synthetic(30, seg), PRICES["0.5"], seg)
    assert chosen and chosen[0] == 2
    never = sum(PRICES["0.5"].cost(u) for u in _synthetic(30, seg)[NEVER].uses)
    assert cost < never


def test_a_transition_reads_what_the_earlier_run_left_in_the_cache() -> None:
    seg = _bytes_segments()
    a, b, c = b"a" * 2048, b"b" * 1024, b"c" * 512
    assert transition(seg, None, [a, b], [a, b, c]) == CacheUse(2048 + 1024 + 512, 3072, 512)
    assert transition(seg, None, [a, c], [a, b, c]).cached_tokens == 2048
    # the older prompt kept as well: the longer of the two prefixes is read
    assert transition(seg, [a, b], [a, c], [a, b, c]).cached_tokens == 3072


@pytest.fixture(scope="module")
def job() -> Job:
    return every_turn_job(CONV)


@pytest.fixture(scope="module")
def row(job: Job) -> Result:
    (result,) = conversation(job)
    return result


def test_on_the_corpus_the_schedule_replayed_costs_what_the_programme_says(
    job: Job, row: Result
) -> None:
    assert row.schedule  # this conversation pays for a compaction at r = 0.5
    assert row.optimal < row.direct
    assert row.replayed == pytest.approx(row.optimal, rel=0.01)
    solo = Job(job.conv, job.methods[1:], job.pricings, 0, cadence="every-turn", max_requests=30)
    p = job.pricings[0]
    runs = runs_of(job, solo)[p.name]
    cost = {k: sum(p.cost(u) for u in t.uses) for k, t in runs.items()}
    assert row.optimal <= min(cost.values()) + 1e-6  # never, or once anywhere
    assert programme(runs, p, fresh_segments(job)) == (row.optimal, tuple(row.schedule))
    # the oracle's run compacts where told, the never run nowhere under the budget
    k = row.schedule[0]
    assert runs[k].compacted[k] and not any(runs[NEVER].compacted)
    assert replay_track(solo, (k,)).uses == runs[k].uses  # a replay is deterministic


def test_an_earlier_runs_optimal_is_set_beside_the_online_variants_own_replay(
    job: Job, row: Result
) -> None:
    """``--optimal-from``: the optimal's figures come from the earlier run's rows, the online
    variant's and direct's from its own replay, which is the one ``conversation`` makes."""
    p = job.pricings[0]
    known = {(row.conv_id, p.name): {**asdict(row), "optimal": 1.0, "schedule": [7]}}
    again = online_only(job, known)
    assert (again.online, again.direct, again.online_at) == (row.online, row.direct, row.online_at)
    assert (again.optimal, again.replayed, again.schedule) == (1.0, row.replayed, [7])
    with pytest.raises(KeyError):
        online_only(job, {})  # a conversation the earlier run lacks is not made up


def test_look_every_sets_how_often_the_online_variant_looks(
    job: Job, row: Result, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--look-every 1``: the online variant looks at every request, so its cuts need not fall
    where prune's own looks (every fourth request, or when a cut may have paid) put them; the
    optimal's figures still come from the earlier run."""
    monkeypatch.setattr(prune, "WARM_LOOK_EVERY", prune.WARM_LOOK_EVERY)  # restored after
    earlier, out = tmp_path / "earlier.json", tmp_path / "out.json"
    earlier.write_text(json.dumps({"rows": [asdict(row)]}))
    args = ["--optimal-from", str(earlier), "--prices", "0.5", "--max-requests", "30"]
    main([*args, "--look-every", "1", "--jobs", "1", "--json", str(out)])
    (again,) = json.loads(out.read_text())["rows"]
    assert prune.WARM_LOOK_EVERY == 1
    looked_each = [k for k, c in enumerate(replay_track(job, None).compacted) if c]
    assert again["online_at"] == looked_each != row.online_at
    # between looks prune counts a step from the look that first sees it: its cut never sooner
    assert row.online_at[0] >= looked_each[0]
    assert (again["optimal"], again["schedule"]) == (row.optimal, row.schedule)


def test_the_prices_share_the_oracle_s_runs_and_get_the_rows_each_price_alone_gets(
    job: Job, row: Result
) -> None:
    """One job at several prices (what ``main`` runs): the oracle's runs are replayed once and
    priced at each, so each price's row is the one a job at that price alone gets."""
    prices = (PRICES["0.1"], job.pricings[0])
    together = conversation(dataclasses.replace(job, pricings=prices))
    assert [r.price for r in together] == [p.name for p in prices]
    assert together[1] == row
    (alone,) = conversation(dataclasses.replace(job, pricings=prices[:1]))
    assert together[0] == alone
    assert alone.online != row.online  # the online schedule reads the price: its own replay
    handed = HANDED_ON[0]
    never = oracle_tracks(dataclasses.replace(job, pricings=prices), ())
    assert HANDED_ON[0] == handed  # under the budget the oracle decides every choice ...
    assert never["r=0.1"].uses is never[row.price].uses  # ... so the run is replayed once
    assert never["r=0.1"].direct != never[row.price].direct  # and priced at each


def test_a_run_prune_s_own_schedule_decided_in_is_replayed_at_each_price(job: Job) -> None:
    """Over the budget's trigger the oracle hands the choice to prune's schedule, which may read
    the price: that run is replayed at every price, not shared."""
    prices = (PRICES["0.1"], PRICES["0.5"])
    small = dataclasses.replace(
        job,
        methods=(dataclasses.replace(job.methods[1], budget=6000),),
        pricings=prices,
    )
    handed = HANDED_ON[0]
    tracks = oracle_tracks(small, ())
    assert HANDED_ON[0] > handed  # over the budget's trigger: prune's schedule chose
    assert set(tracks) == {p.name for p in prices}
    assert tracks["r=0.1"].uses is not tracks["r=0.5"].uses  # two replays
    for p in prices:
        alone = dataclasses.replace(small, pricings=(p,))
        assert oracle_tracks(alone, ())[p.name].uses == tracks[p.name].uses
