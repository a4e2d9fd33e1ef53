"""``lineage.resume_of`` keeps a resent list's key (``Context.recall``): over random sessions that
resend a list, grow, fork to an earlier turn, change the last message's provenance tag and come
back to a stored tip, it gives what ``resume`` works out with nothing kept."""

from __future__ import annotations

import random
from typing import Any

import pytest

from proxy.protocols.base import TAG
from proxy.rewrite import lineage
from rules.base import ListMemo, Message, SessionState
from tests.support.factories import assistant, ctx, user


def _session(seed: int, steps: int) -> list[list[Message]]:
    rng = random.Random(seed)
    history: list[Message] = [user("start")]
    out: list[list[Message]] = []
    for n in range(steps):
        move = rng.random()
        if out and move < 0.08:  # back to a list sent before (its head now a tip, or the head)
            history = rng.choice(out[-10:])
        elif move < 0.3:
            history = [*history, assistant(f"a{n}"), user(f"u{n}")]
        elif move < 0.55:
            pass  # the very list again
        elif move < 0.7:
            history = list(history)  # the same objects, a list of its own
        elif move < 0.8 and len(history) > 3:  # back to an earlier turn: a fork
            history = history[: rng.randrange(1, len(history) - 1)]
            history = [*history, user(f"fork {n}")]
        elif move < 0.9:  # the last message again under another provenance tag
            history = [*history[:-1], {**history[-1], TAG: rng.choice(["block", "string"])}]
        else:
            history = [*history[:-1], user(f"edited {n}")]
        out.append(history)
    return out


def _resume(messages: list[Message], state: SessionState, memo: ListMemo | None) -> Any:
    context = ctx(messages, state=state)
    if memo is not None:
        context = context.evolve(memo=memo)
    hashes = context.hashes_of(messages)
    if memo is None:
        return lineage.resume(state, hashes, messages)
    return lineage.resume_of(context, hashes)


@pytest.mark.parametrize("seed", range(20))
def test_the_kept_key_is_the_key_worked_out_afresh(seed: int) -> None:
    memo: ListMemo = {}
    state = SessionState({"entities": ["e"]})
    kept = 0
    for messages in _session(seed, 80):
        data = state.data
        got = _resume(messages, state, memo)
        want = _resume(messages, state, None)
        assert state.data is data  # neither changes the state it resumes from
        assert got[1:] == want[1:]
        assert got[0].to_json() == want[0].to_json()
        assert (got[0] is state) == (want[0] is state)
        found, _ = (
            ctx(messages, state=state)
            .evolve(memo=memo)
            .recall(lineage.RESUME_MEMO, (state.get(lineage.NAMESPACE),))
        )
        kept += found
        state = lineage.record(got[0], got[2]).with_value("entities", [len(messages)])
    assert kept > 0  # resent lists took the key kept


def test_a_kept_key_is_not_given_to_another_lineage() -> None:
    """The very same messages on a lineage whose head is another history: a fork there, worked
    out again, not the key kept for the head they extended."""
    messages = [user("start"), assistant("a"), user("b")]
    memo: ListMemo = {}
    state = lineage.record(SessionState({"entities": ["e"]}), lineage.key_of(["x"]))
    first = _resume(messages, SessionState({"entities": ["e"]}), memo)
    assert first[1] is None
    got = _resume(messages, state, memo)
    want = _resume(messages, state, None)
    assert want[1] is not None  # a fork
    assert got[1:] == want[1:] and got[0].to_json() == want[0].to_json()
