"""What carrying each reclaimable step has cost (``rules/context/carrying.py``), and the warm
break-even rule crediting a cut with its own steps' carrying: the figures kept step by step in
the session's memory, a step no longer offered leaving with its figure."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from rules.context import carrying, prune, schedule
from tests.rules.context.test_schedule import NOW, conversation, step
from tests.rules.context.test_schedule import memory as session_memory
from tests.support.factories import TOKENS, ctx

# break-even alone: the default's wait for the risk budget is test_warm_risk's
BREAK_EVEN = prune.Config(warm_risk_share=None)

BUDGET = 200_000


def test_a_step_carries_its_tokens_at_the_cache_price_each_request_since_the_last_look() -> None:
    stale = {"mask:a": (100.0, 2_000), "mask:gone": (5_000.0, 9_000)}
    now = carrying.carry(stale, [("mask:a", 2_500), ("shrink:b", 700)], 3, 0.1)
    # a: what it had, plus r × what it freed at the last look × 3 requests; now at its new size
    assert now["mask:a"] == (pytest.approx(100 + 0.1 * 2_000 * 3), 2_500)
    assert now["shrink:b"] == (0.0, 700)  # new to the offer: it has cost nothing yet
    assert "mask:gone" not in now  # no longer offered (needed again): it leaves with its figure


def test_a_session_sum_without_step_figures_is_shared_by_size() -> None:
    seeded = carrying.seed(900.0, [("a", 1_000), ("b", 2_000)])
    assert seeded == {"a": (pytest.approx(300.0), 1_000), "b": (pytest.approx(600.0), 2_000)}
    assert carrying.seed(900.0, []) == {}


def test_the_figures_are_read_from_their_own_namespace() -> None:
    stored = {"mask:a": [10.0, 500]}
    m = schedule.Memory.load({"requests": 8, "looked": 7}, stored)
    assert m.steps() == {"mask:a": (10.0, 500)}
    assert "stale" not in m.after(1.0, 9_000, compacted=False, stored=None)  # not in the memory
    bad = {"x": "junk", "y": [1, 2, 3], "z": [1.5, 20], "b": [True, 2]}
    assert schedule.Memory.load({}, bad).steps() == {"z": (1.5, 20)}


def _state(messages: list[dict[str, Any]], stale: Any, **memory: Any) -> Any:
    size = TOKENS.count_messages(messages)
    state = session_memory(20, NOW - 5.0, size, 500.0, **memory)
    return state.with_value(prune.CARRYING, stale) if stale is not None else state


def _session(messages: list[dict[str, Any]], stale: Any = None, **memory: Any) -> Any:
    """Request 20 of a session whose last look was at 19, a look due now."""
    state = _state(messages, stale, looked=19, due=20, **memory)
    return prune.apply(ctx(messages, now=NOW, state=state, budget=BUDGET), BREAK_EVEN)


def _kept(out: Any) -> dict[str, tuple[float, int]]:
    memory = schedule.Memory.load(out.state.get(prune.SESSION), out.state.get(prune.CARRYING))
    return memory.steps()


def test_the_figures_are_written_at_a_look_and_cleared_by_a_compaction_not_warm() -> None:
    messages = conversation(28)
    looked = _session(messages)
    assert _kept(looked)
    stored = looked.state.get(prune.CARRYING)
    # the next request, no look due: the figures' namespace is not written again
    nxt = [*messages, *step(99, 40)]
    state = looked.state
    quiet = prune.apply(ctx(nxt, now=NOW + 5, state=state, budget=BUDGET), BREAK_EVEN)
    assert schedule.Memory.load(quiet.state.get(prune.SESSION)).looked == 19 + 1
    assert quiet.state.get(prune.CARRYING) is stored
    cold = prune.apply(ctx(nxt, now=NOW + 900, state=state, budget=BUDGET), BREAK_EVEN)
    assert cold.report["prune"]["compacted"] and cold.state.get(prune.CARRYING) == {}


def test_a_look_keeps_each_steps_figure() -> None:
    out = _session(conversation(28))
    kept = out.state.get(prune.SESSION)
    assert kept["looked"] == 20 and kept["reclaimable"] > 0  # this request looked
    stale = _kept(out)
    assert stale and sum(f for _, f in stale.values()) == kept["reclaimable"]
    assert all(c == 0.0 for c, _ in stale.values())  # first offered now: nothing carried yet


def test_a_cut_is_paid_by_its_own_steps_carrying_not_by_a_result_needed_again() -> None:
    """The same session sum: on the steps offered now, a cut; on a result that is no longer
    offered (needed again), none. With a share of the session's sum by size, both would cut."""
    messages = conversation(28)
    first = _session(messages)
    figures = first.report["prune"]["schedule"]
    price = figures["bust_cost"] + figures["expected_loss"]
    offered = _kept(first)
    total = sum(f for _, f in offered.values())
    # the requests since the last look (one) at r = 0.1 add 0.1 × freed to each step
    own = {k: [2 * price * f / total, f] for k, (_, f) in offered.items()}
    paid = _session(messages, stale=own, carried=2 * price, reclaimable=total)
    assert paid.report["prune"]["schedule"]["decision"] == "paid"
    assert paid.report["prune"]["compacted"]
    assert paid.report["prune"]["schedule"]["carried"] >= 2 * price
    elsewhere = {"mask:" + "0" * 16: [2 * price, total]}  # a result not offered any more
    none = _session(messages, stale=elsewhere, carried=2 * price, reclaimable=total)
    assert none.report["prune"]["schedule"]["decision"] == "none"
    assert not none.report["prune"]["compacted"]
    # the old memory (a sum, no step figures) still pays: it is shared by size
    legacy = _session(messages, carried=2 * price, reclaimable=total)
    assert legacy.report["prune"]["schedule"]["decision"] == "paid"


def test_a_partial_cut_leaves_the_other_steps_their_own_figures() -> None:
    """A cut of the steps at the tail: the steps before it keep what they have carried, the
    cut ones leave the memory."""
    messages = conversation(28)
    first = _session(messages)
    offered = _kept(first)
    assert len(offered) >= 2
    figures = first.report["prune"]["schedule"]
    price = figures["bust_cost"] + figures["expected_loss"]
    # only the last-offered step (the tail's) has carried its price many times over
    keys = list(offered)
    own = {k: [0.0, f] for k, (_, f) in offered.items()}
    own[keys[-1]] = [50 * price, offered[keys[-1]][1]]
    own[keys[0]] = [1.0, offered[keys[0]][1]]
    out = _session(messages, stale=own, reclaimable=sum(f for _, f in offered.values()))
    info = out.report["prune"]
    assert info["compacted"] and info["schedule"]["decision"] == "paid"
    left = _kept(out)
    assert keys[-1] not in left  # cut: the cheapest cut its carrying pays for is at the tail
    # not cut: its own figure, grown by one request's carrying
    assert left[keys[0]][0] == pytest.approx(1.0 + 0.1 * offered[keys[0]][1], abs=0.2)


def _growing(requests: int, monkeypatch: pytest.MonkeyPatch, every: int) -> list[Any]:
    """A session of reads of files never used again, one step a request, 5 s apart: each
    request's kept figures (``steps()``) and whether it looked, with looks at most ``every``
    requests apart."""
    from rules.base import SessionState
    from tests.support.factories import ctx, user

    monkeypatch.setattr(prune, "WARM_LOOK_EVERY", every)
    state, messages, out = SessionState(), [user("Refactor the parser")], []
    for k in range(requests):
        messages = messages + step(k, 40)
        res = prune.apply(ctx(list(messages), state=state, budget=BUDGET, now=5.0 * k), BREAK_EVEN)
        assert not res.report["prune"]["compacted"]
        state = res.state
        memory = schedule.Memory.load(state.get(prune.SESSION), state.get(prune.CARRYING))
        out.append((memory.looked == k, memory.steps()))
    return out


def test_figures_kept_between_looks_equal_a_look_every_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cheap accounting: a look every 4th request (or when due) adds to each step offered
    at the previous look what it freed then, for each request since: what a look at every
    request adds up over those requests. A step first offered between two looks is counted from
    the look that sees it: less, never more (a cut comes later, never sooner)."""
    cheap = _growing(24, monkeypatch, prune.WARM_LOOK_EVERY)
    every = _growing(24, monkeypatch, 1)
    looked = [k for k, (did, _) in enumerate(cheap) if did]
    assert 3 <= len(looked) < 24  # it looked, and not at every request
    fewer = 0
    for before, now in itertools.pairwise(looked):
        exact, lazy = every[now][1], cheap[now][1]
        assert lazy.keys() == exact.keys()  # the same steps offered
        for key, (carried, freed) in lazy.items():
            assert freed == exact[key][1]
            assert carried <= exact[key][0] + 0.05 * now  # (rounded to 0.1 at each look)
            if key in cheap[before][1]:  # offered at the last look: the same carrying since
                added = carried - cheap[before][1][key][0]
                exact_added = exact[key][0] - every[before][1][key][0]
                assert added == pytest.approx(exact_added, abs=0.05 * (now - before) + 0.1)
                assert added > 0
            else:
                fewer += carried < exact[key][0]
    assert fewer  # some step first offered between looks had carried already
