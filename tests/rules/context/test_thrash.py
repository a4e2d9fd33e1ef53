"""A session held at the budget compacts at most once per ``schedule.HEADROOM`` (5) requests:
the goal of a forced compaction leaves room for that much growth; fewer than 5 requests after
one, only the budget itself forces the next (the block the reserve was kept for is in the prompt
by then); and fewer than 5 requests after any compaction, a request over the budget is not cut
again (``held``, with why: no cut fits, the deepest leaves less than 5 requests of growth, or
the session grew faster than the last cut left room for), within the model's window, on a warm
cache."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest

from rules.base import CacheFacts, SessionState
from rules.chain.validator import find_violations
from rules.context import prune, schedule
from tests.support.factories import TOKENS, assistant, ctx, result, shell, user

BUDGET = 10_000  # reserve: 5% (500); the goal is not below half of it (target_ratio)


def _step(k: int, lines: int, parts: int = 4) -> list[dict[str, Any]]:
    """One agent step: ``parts`` parallel runs, each printing ``lines`` distinct lines."""
    calls = [shell(f"c{k}_{j}", f"./probe --case {k} --part {j}") for j in range(parts)]
    out: list[dict[str, Any]] = [assistant(f"step {k}", *calls)]
    for j in range(parts):
        body = "\n".join(f"case_{k}_{j}_value_{i} = {i * 31 % 97}" for i in range(lines))
        out.append(result(f"c{k}_{j}", body))
    return out


def _replay(
    steps: list[list[dict[str, Any]]],
    budget: int,
    task: str = "Find why the cache misses",
    window_room: int | None = 120_000,
    pause: dict[int, float] | None = None,
) -> list[dict[str, Any]]:
    """Each step sent as the next request of one session (5 s apart); prune's report of each,
    with the forwarded request's size. ``window_room``: the model's (120,000: gpt-4o's, less the
    output reserve); ``pause``: seconds of idle time before a step (the cache cools)."""
    state, messages, reports, now = SessionState(), [user(task)], [], 0.0
    for k, step in enumerate(steps):
        messages = messages + step
        now += 5.0 + (pause or {}).get(k, 0.0)
        context = ctx(list(messages), state=state, budget=budget, now=now, window_room=window_room)
        out = prune.apply(context, prune.Config())
        assert find_violations(out.messages) == []
        state = out.state
        reports.append({**out.report["prune"], "size": TOKENS.count_messages(out.messages)})
    return reports


def _compactions(reports: list[dict[str, Any]]) -> list[int]:
    return [k for k, r in enumerate(reports) if r["compacted"]]


@pytest.mark.parametrize("lines", [46, 48])
def test_steady_growth_at_the_budget_compacts_once_per_five_requests(lines: int) -> None:
    # ~1,150 tokens a request: 5 requests of growth do not fit between the goal's floor (half
    # the budget) and the budget less the reserve, but 4 fit under the budget itself
    growth = TOKENS.count_messages(_step(0, lines))
    assert (BUDGET // 2) + 4 * growth <= BUDGET < (BUDGET // 2) + 5 * growth
    reports = _replay([_step(k, lines) for k in range(60)], BUDGET)
    cuts = _compactions(reports)
    assert len(cuts) >= 8  # held at the budget all along
    assert all(b - a >= schedule.HEADROOM for a, b in itertools.pairwise(cuts))
    assert all(r["size"] <= BUDGET for r in reports)
    assert all(not r["over_budget"] for r in reports)


def test_a_burst_that_fits_the_budget_does_not_force_a_second_cut() -> None:
    # small steps, then right after a compaction one large result: it takes the request past the
    # room kept for inject's block but not past the budget
    steps = [_step(k, 10) for k in range(40)]
    reports = _replay(steps, BUDGET)
    first = _compactions(reports)[0]
    after = reports[first]["size"]
    growth = TOKENS.count_messages(steps[0])
    lines = (BUDGET - after - 3 * growth - 200) * 4 // 26  # ~26 characters a line
    burst = [*steps[: first + 1], _step(first + 1, lines, parts=1), *steps[first + 2 :]]
    reports = _replay(burst, BUDGET)
    assert _compactions(reports)[0] == first
    # 3 requests after the burst the session is past the room kept for inject's block (the
    # trigger at any other time), still under the budget
    assert BUDGET - reports[first]["reserve"] < reports[first + 3]["size"] + growth <= BUDGET
    cuts = _compactions(reports)
    assert all(b - a >= schedule.HEADROOM for a, b in itertools.pairwise(cuts))
    assert all(r["size"] <= BUDGET for r in reports)


def _floor_session(fields: int = 800) -> tuple[list[list[dict[str, Any]]], int, str]:
    """A session whose task is large against a budget of 4,000, each request adding ~190
    tokens: with 800 fields the task alone is over the budget (no cut fits); with 450 the
    deepest cut fits it, but leaves room for fewer than 5 requests of growth."""
    task = "Port the importer to the new schema. " + " ".join(
        f"field_{i} maps to column_{i * 7 % 101};" for i in range(fields)
    )
    return [_step(k, 30, parts=1) for k in range(30)], 4_000, task


FLOORS = pytest.mark.parametrize("fields", [800, 450], ids=["over the budget", "low room"])


def _held(reports: list[dict[str, Any]]) -> list[int]:
    return [k for k, r in enumerate(reports) if r.get("schedule", {}).get("decision") == "held"]


def test_a_floor_over_the_budget_is_cut_to_once_then_held() -> None:
    # the task alone is over the budget: no cut fits, each request ages a result out of the last
    # two (a gain over min_gain), and re-cutting for it would re-bill the prompt every request
    steps, budget, task = _floor_session()
    assert TOKENS.count_text(task) > budget
    reports = _replay(steps, budget, task=task)
    cuts = _compactions(reports)
    assert cuts, "the floor is cut to once"
    assert all(b - a >= schedule.HEADROOM for a, b in itertools.pairwise(cuts))
    held = [reports[k] for k in _held(reports)]
    assert held and all(r["over_budget"] for r in held)
    for r in held:  # the report says why: the deepest cut would still be over the budget
        assert r["schedule"]["deepest"] > budget and r["schedule"]["held"] == "over"


def test_a_floor_with_room_for_less_than_five_requests_is_held_between_cuts() -> None:
    # the deepest cut fits the budget, but the session's growth fills what it leaves in fewer
    # than 5 requests: cut on each of those, it would re-bill the prompt nearly every request
    steps, budget, task = _floor_session(450)
    assert TOKENS.count_text(task) < budget
    reports = _replay(steps, budget, task=task)
    cuts = _compactions(reports)
    assert len(cuts) >= 4  # held at the budget all along
    assert all(b - a >= schedule.HEADROOM for a, b in itertools.pairwise(cuts))
    held = [reports[k] for k in _held(reports)]
    assert held and all(r["over_budget"] for r in held)
    for r in held:  # the figures it was held by: no cut leaves room for 5 requests of growth
        fig = r["schedule"]
        assert fig["held"] == "floor"
        assert fig["deepest"] <= budget < fig["deepest"] + schedule.HEADROOM * fig["growth"]
    # past 5 requests it is cut to the floor again: over the budget by less than that growth
    growth = max(r["schedule"]["growth"] for r in held)
    assert max(r["size"] for r in reports) < budget + schedule.HEADROOM * growth


@FLOORS
def test_a_request_is_never_held_past_the_window(fields: int) -> None:
    # the same session, with the model's window leaving room for only a little more than the
    # floor: a request the hold would leave past that room is cut as before
    steps, budget, task = _floor_session(fields)
    free = _replay(steps, budget, task=task)
    held = [free[k] for k in _held(free)]
    assert held
    room = min(r["size"] for r in held) + 1  # the smallest held request fits; larger ones not
    assert max(r["size"] for r in held) > room
    reports = _replay(steps, budget, task=task, window_room=room)
    for k in _held(reports):
        assert reports[k]["size"] <= room
    assert len(_compactions(reports)) > len(_compactions(free))


@FLOORS
def test_nothing_is_held_where_the_window_is_not_known(fields: int) -> None:
    steps, budget, task = _floor_session(fields)
    reports = _replay(steps, budget, task=task, window_room=None)
    assert not _held(reports)
    assert len(_compactions(reports)) > len(_compactions(_replay(steps, budget, task=task)))


@FLOORS
def test_a_cold_request_is_cut_not_held(fields: int) -> None:
    # the whole prompt is billed anyway on a cold cache: the cut costs nothing more
    steps, budget, task = _floor_session(fields)
    warm = _replay(steps, budget, task=task)
    held = _held(warm)
    assert held
    # the held request a cut would shrink most (the first ones free less than ``min_gain``)
    k = max(held, key=lambda k: warm[k]["schedule"]["before"] - warm[k]["schedule"]["deepest"])
    cold = _replay(steps, budget, task=task, pause={k: 3_600.0})
    assert cold[k]["schedule"]["cache"] == "cold"
    assert cold[k]["compacted"] and cold[k]["schedule"]["decision"] != "held"


def test_a_burst_past_the_growth_held_for_waits_five_requests() -> None:
    # a large result arrives with a request the budget cut (its current turn, kept): the next
    # request is over the budget by more than 5 requests of the session's growth. A cut now
    # would be the session's second within 5 requests: it is held, and cut 5 requests after
    steps, budget, task = _floor_session(450)
    cut = _compactions(_replay(steps, budget, task=task))[1]
    steps[cut] = _step(cut, 300, parts=1)
    reports = _replay(steps, budget, task=task)
    assert reports[cut]["compacted"]
    after = reports[cut + 1]
    fig = after["schedule"]
    reach = schedule.HEADROOM * fig["growth"]
    assert fig["deepest"] <= budget < fig["deepest"] + reach  # the floor leaves little room
    assert fig["before"] > budget + reach  # and it is further over than that growth
    assert not after["compacted"] and fig["decision"] == "held" and fig["held"] == "floor"
    assert all(k in _held(reports) for k in range(cut + 1, cut + schedule.HEADROOM))
    assert reports[cut + schedule.HEADROOM]["compacted"]
    cuts = _compactions(reports)
    assert all(b - a >= schedule.HEADROOM for a, b in itertools.pairwise(cuts))


def _burst_session() -> tuple[list[list[dict[str, Any]]], int]:
    """Steady small steps, and right after the first compaction a large result; the
    compaction's request."""
    steps = [_step(k, 10) for k in range(40)]
    first = _compactions(_replay(steps, BUDGET))[0]
    steps[first + 1] = _step(first + 1, 800, parts=1)
    return steps, first


def test_a_burst_a_deeper_cut_would_hold_is_held_too() -> None:
    # steady small steps, then right after a compaction a result that takes the request past
    # the budget, where a deeper cut would leave room for 5 requests: not cut again until 5
    # requests after the last compaction (``spacing``)
    steps, first = _burst_session()
    reports = _replay(steps, BUDGET)
    assert reports[first]["compacted"] and reports[first + 1]["over_budget"]
    fig = reports[first + 1]["schedule"]
    assert fig["decision"] == "held" and fig["held"] == "spacing"
    assert fig["deepest"] + schedule.HEADROOM * fig["growth"] <= BUDGET  # a cut would hold
    cuts = _compactions(reports)
    assert first + schedule.HEADROOM in cuts
    assert all(b - a >= schedule.HEADROOM for a, b in itertools.pairwise(cuts))


def test_a_burst_is_cut_past_the_window_when_cold_or_with_no_window_known() -> None:
    steps, first = _burst_session()
    held = _replay(steps, BUDGET)[first + 1]
    assert held["schedule"]["held"] == "spacing"
    # a window that leaves no room for it: cut, never sent past the window
    tight = _replay(steps, BUDGET, window_room=held["size"] - 1)[first + 1]
    assert tight["compacted"] and tight["size"] < held["size"]
    # the cache cold (a pause past its TTL): the prompt is billed whole anyway, so cut
    cold = _replay(steps, BUDGET, pause={first + 1: 3_600.0})[first + 1]
    assert cold["schedule"]["cache"] == "cold" and cold["compacted"]
    # no window known: nothing is held
    unknown = _replay(steps, BUDGET, window_room=None)[first + 1]
    assert unknown["compacted"] and unknown["schedule"]["decision"] != "held"


def test_within_five_requests_of_any_compaction_only_the_budget_forces_one() -> None:
    # the reserve under the budget is for the block inject renders at a compaction: fewer than
    # 5 requests after one (a warm cut as well as a forced one) that block is in the prompt
    room, budget = 9_500, 10_000
    after_warm = schedule.Memory(requests=3, last_cut=1)
    after_forced = schedule.Memory(requests=3, last_cut=1)
    assert schedule.trigger(room, budget, after_warm) == budget
    assert schedule.trigger(room, budget, after_forced) == budget
    assert schedule.trigger(room, budget, replace(after_warm, requests=6)) == room
    assert schedule.trigger(room, budget, schedule.Memory(requests=3)) == room
    assert schedule.trigger(room, None, after_warm) == room


def test_a_request_is_held_within_five_requests_of_a_cut_with_why() -> None:
    # over the budget (4,000) by 1,800, a cut 2 requests ago: held whatever a cut would leave,
    # the reason saying what that is; 5 requests after the cut, cut
    prefix = [0, 500, 1_000, 2_500, 4_000, 5_000, 5_800]

    def decide(
        memory: schedule.Memory,
        freed: tuple[int, int] = (2_300, 1_000),
        hard_limit: int = 120_000,
    ) -> tuple[str, str | None]:
        steps = [schedule.Step("drop", freed[0], 2), schedule.Step("drop", freed[1], 4)]
        choice = schedule.choose(
            steps, prefix, 5_800, 3_800, 2_000, CacheFacts(), memory, "warm", {}, 10,
            budget=4_000, hard_limit=hard_limit,
        )  # fmt: skip
        return str(choice.figures["decision"]), choice.figures.get("held")

    # the deepest cut leaves 2,500 tokens: under the budget by 1,500
    later = schedule.Memory(requests=3, last_at=0.0, last_tokens=5_400, growth=400.0, last_cut=1)
    assert decide(later) == ("held", "floor")  # 5 requests of 400 do not fit in 1,500
    assert decide(replace(later, growth=250.0)) == ("held", "spacing")  # they fit
    assert decide(later, (1_000, 500)) == ("held", "over")  # the deepest is over the budget
    # the growth not measured yet (the second request): held all the same, as a burst
    second = schedule.Memory(requests=1, last_at=0.0, last_tokens=3_000, last_cut=0)
    assert decide(second) == ("held", "spacing")
    # a limit under the request (the overflow rescue's retry, a window the upstream stated): cut
    assert decide(later, hard_limit=5_000)[0] == "forced"
    # 5 requests after the last compaction: cut
    assert decide(replace(later, requests=6))[0] == "forced"
    # no compaction yet: cut
    assert decide(replace(later, last_cut=-1))[0] == "forced"


@FLOORS
def test_the_cut_comes_back_exactly_five_requests_after(fields: int) -> None:
    # a hold ends: 5 requests after the cut the session is cut to the floor again
    steps, budget, task = _floor_session(fields)
    cuts = _compactions(_replay(steps, budget, task=task))
    assert len(cuts) >= 5
    assert all(b - a == schedule.HEADROOM for a, b in itertools.pairwise(cuts)), cuts


def _choose_at_the_window(provider_prompt: int) -> schedule.Choice:
    """A request of 5,800 tokens by our count, a window room of 5,900, a floor over the budget
    (4,000) and a forced cut 2 requests ago; the provider counted ``provider_prompt`` tokens of
    the previous request (5,400 by ours)."""
    steps = [schedule.Step("drop", 1_000, 2), schedule.Step("drop", 500, 4)]
    prefix = [0, 500, 1_000, 2_500, 4_000, 5_000, 5_800]
    memory = schedule.Memory(requests=3, last_at=0.0, last_tokens=5_400, growth=400.0, last_cut=1)
    facts = CacheFacts(last_prompt_tokens=provider_prompt)
    return schedule.choose(
        steps, prefix, 5_800, 3_800, 2_000, facts, memory, "warm", {}, 10,
        budget=4_000, hard_limit=5_900,
    )  # fmt: skip


def test_the_hold_counts_the_window_as_the_provider_does() -> None:
    # the provider counts 1.3 of its tokens per one of ours: 5,800 of ours pass its 5,900
    assert _choose_at_the_window(5_400).figures["decision"] == "held"
    assert _choose_at_the_window(7_020).figures["decision"] != "held"
