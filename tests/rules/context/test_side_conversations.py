"""Other conversations under one session id do not disturb a conversation's pruning.

Claude Code's title call and its Task sub-agents send the main conversation's session id, and two
sub-agents may run interleaved. prune's overlay and its memory of the requests are kept per
session; a request of another conversation holds none of the main one's messages. The main
conversation's requests are forwarded as they would be without the others: its cuts replayed
byte for byte (``overlay_away``), its compactions as often as alone (``session_roots``)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from rules.base import SessionState
from rules.chain.validator import find_violations
from rules.context import overlay_away, prune, session_roots
from tests.rules.context.test_thrash import BUDGET, _step
from tests.support.factories import ctx, system, user


def _main(k: int) -> list[dict[str, Any]]:
    return [system("You are the main agent."), user("Find why the cache misses"),
            *itertools.chain.from_iterable(_step(i, 47) for i in range(k + 1))]  # fmt: skip


def _side(k: int, kind: str) -> list[dict[str, Any]]:
    """Another conversation's request under the same session: a title call (one turn, asked
    anew each time), or a sub-agent's growing loop."""
    if kind == "title":
        return [system("Generate a title."), user(f"<session>Find why {k}</session>")]
    steps = itertools.chain.from_iterable(_step(100 + i, 30, 2) for i in range(k + 1))
    return [system("You are a sub-agent."), user("Search the logs"), *steps]


def _run(steps: int, side: str | None) -> tuple[list[list[dict[str, Any]]], list[bool], Any]:
    """The main conversation's forwarded messages and compactions, a side request (``side``)
    after each of its requests; the state at the end."""
    state, forwarded, compacted = SessionState(), [], []
    for k in range(steps):
        out = prune.apply(ctx(_main(k), state=state, budget=BUDGET, now=10.0 * k), prune.Config())
        assert find_violations(out.messages) == []
        state = out.state
        forwarded.append(out.messages)
        compacted.append(out.report["prune"]["compacted"])
        if side is not None:
            other = ctx(_side(k, side), state=state, budget=BUDGET, now=10.0 * k + 5)
            state = prune.apply(other, prune.Config()).state
    return forwarded, compacted, state


@pytest.mark.parametrize("side", ["title", "subagent"])
def test_the_main_conversation_is_forwarded_as_without_the_others(side: str) -> None:
    alone, cuts, _ = _run(40, None)
    assert sum(cuts) >= 5  # held at the budget: compacting every few requests
    beside, cuts_beside, state = _run(40, side)
    assert cuts_beside == cuts
    assert beside == alone  # the same bytes: its cache prefix kept as alone
    memo = state.get(prune.SESSION)
    assert len(memo.get(session_roots.OTHERS, {})) == 1  # the main one's, the side's on top


def test_a_sub_agent_compacts_on_its_own_schedule() -> None:
    _, _, state = _run(40, "subagent")
    overlay = state.get(prune.NAMESPACE)
    away = overlay.get(overlay_away.AWAY) or {}
    assert overlay["edits"] or overlay["dropped"]  # the sub-agent's own cuts, at the top
    assert away.get("edits") or away.get("dropped")  # the main one's, kept away


PRESENT = {"a1": 0, "a2": 1, "a3": 2}


def test_nothing_away_and_every_anchor_here_is_the_stored_value_itself() -> None:
    stored = {"edits": {"a1": {"action": "mask", "reason": "r"}}, "dropped": ["a2"]}
    seen, away, moved = overlay_away.split(stored, PRESENT)
    assert seen is stored and away is None and not moved


def test_entries_go_away_and_come_back_with_their_messages() -> None:
    stored = {
        "edits": {"a1": {"action": "mask", "reason": "r"}, "b1": {"action": "cap", "reason": "c"}},
        "dropped": ["a2", "b2", "b3"],
        "compactions": 2,
        "names": 3,
        "chosen": {"b2": [1, 2]},
    }
    seen, away, moved = overlay_away.split(stored, PRESENT)
    assert moved
    assert seen["edits"] == {"a1": {"action": "mask", "reason": "r"}}
    assert seen["dropped"] == ["a2"] and seen["compactions"] == 2
    assert away == {
        "edits": {"b1": {"action": "cap", "reason": "c"}},
        "dropped": ["b2", "b3"],
        "chosen": {"b2": [1, 2]},
        "names": 3,
    }
    # the other conversation's next request: its entries back, in its order; ours away
    other = {"b2": 0, "b1": 1, "b3": 2}
    back, away_again, moved = overlay_away.split({**seen, overlay_away.AWAY: away}, other)
    assert moved
    assert back["edits"] == {"b1": {"action": "cap", "reason": "c"}}
    assert back["dropped"] == ["b2", "b3"] and back["chosen"] == {"b2": [1, 2]}
    assert back["names"] == 3
    assert away_again is not None
    assert away_again["edits"] == {"a1": {"action": "mask", "reason": "r"}}
    assert away_again["dropped"] == ["a2"]


def test_what_stays_away_is_bounded_newest_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(overlay_away, "MAX_AWAY_EDITS", 3)
    monkeypatch.setattr(overlay_away, "MAX_AWAY_DROPPED", 2)
    old = {"edits": {f"o{i}": {"action": "mask", "reason": ""} for i in range(3)},
           "dropped": ["d0", "d1"]}  # fmt: skip
    stored = {"edits": {"n0": {"action": "cap", "reason": ""}}, "dropped": ["d2"],
              overlay_away.AWAY: old}  # fmt: skip
    _, away, _ = overlay_away.split(stored, PRESENT)
    assert away is not None
    assert list(away["edits"]) == ["o1", "o2", "n0"] and away["dropped"] == ["d1", "d2"]


def test_the_memory_of_each_conversation_is_its_own() -> None:
    main = {"requests": 7, "last_cut": 4}
    stored = session_roots.kept(None, main, "m")
    assert session_roots.mine(stored, "m") == {**main, session_roots.ROOT: "m"}
    assert session_roots.mine(stored, "s") is None  # a new conversation: a new memory
    stored = session_roots.kept(stored, {"requests": 1}, "s")
    assert session_roots.switched(stored, "m") and not session_roots.switched(stored, "s")
    assert session_roots.mine(stored, "m") == main  # kept under the others
    legacy = {"requests": 3}  # stored before roots: taken as this conversation's
    assert session_roots.mine(legacy, "x") is legacy
    for r in range(10):
        stored = session_roots.kept(stored, {"requests": r}, f"r{r}")
    assert len(stored[session_roots.OTHERS]) == session_roots.MAX_OTHERS
