"""track_entities' keys of the calls read, kept per session as a set with the state's list
(``rules.entities.seen_calls``): the same state and report as with nothing kept, over random
sessions that grow, resend, branch, drop their oldest turns, retry from an earlier state and
switch sessions, with call ids holding lone surrogates now and then (the state's redaction of
them), a cap the keys go past, and a stored list with a key twice; and the kept set is what a
tool loop's next request uses."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from rules.base import ListMemo, Message, SessionState
from rules.entities import seen_calls, track_entities
from tests.support.factories import assistant, ctx, result, shell, system, user

COMMANDS = ["touch a.txt", "mkdir out", "cat a.txt", "rm -f b.txt", "cp a.txt c.txt"]


def _turn(rng: random.Random, n: int) -> list[Message]:
    ids = [f"c{n}_{k}" + ("\udcff" if rng.random() < 0.05 else "") for k in range(2)]
    calls = [shell(i, rng.choice(COMMANDS)) for i in ids[: rng.randint(1, 2)]]
    out: list[Message] = [assistant(None, *calls)]
    out += [result(c["id"], "ok") for c in calls if rng.random() < 0.9]  # some unanswered yet
    return out


def _requests(seed: int, steps: int) -> list[tuple[list[Message], int | None]]:
    rng = random.Random(seed)
    history: list[Message] = [system(), user("go")]
    out: list[tuple[list[Message], int | None]] = []
    for n in range(steps):
        move = rng.random()
        if out and move < 0.06:  # a retry from an earlier request's state
            k = rng.randrange(len(out))
            out.append((out[k][0], k))
            continue
        if move < 0.6:
            history = [*history, *_turn(rng, n)]
        elif move < 0.7 and len(history) > 4:  # back to an earlier point, another turn after
            history = [*history[: rng.randrange(2, len(history))], *_turn(rng, n)]
        elif move < 0.8 and len(history) > 6:  # the oldest turns dropped by the client
            history = history[:2] + history[rng.randrange(3, len(history) - 2) :]
        elif move < 0.9:  # another session's list, once
            out.append(([system(), user(f"other {n}"), *_turn(rng, n)], None))
            continue
        out.append((history, None))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_the_kept_set_gives_what_a_set_made_afresh_gives(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    known = []
    real_init = seen_calls.SeenCalls.__init__

    def spied(self: Any, *args: Any) -> None:
        real_init(self, *args)
        known.append(self.known)

    monkeypatch.setattr(seen_calls.SeenCalls, "__init__", spied)
    cfg = track_entities.Config(max_seen_calls=[10, 12, 5000][seed % 3])
    memo: ListMemo = {}
    kept_states: list[SessionState] = []
    fresh_states: list[SessionState] = []
    kept_state = fresh_state = SessionState()
    if seed % 4 == 1:  # a stored list holding a key twice: no set is kept for it
        twice = {"seen": ["x:1", "x:1"], "seq": 0, "cwd": None}
        kept_state = fresh_state = SessionState({track_entities.META: twice})
    if seed % 4 == 3:  # a stored key with a lone surrogate (a state from elsewhere)
        odd = {"seen": ["y\udcff:1"], "seq": 0, "cwd": None}
        kept_state = fresh_state = SessionState({track_entities.META: odd})
    for now, (messages, at) in enumerate(_requests(seed, 150)):
        if at is not None:
            kept_state, fresh_state = kept_states[at], fresh_states[at]
        kept_states.append(kept_state)
        fresh_states.append(fresh_state)
        got = track_entities.apply(
            ctx(messages, now=float(now), state=kept_state).evolve(memo=memo), cfg
        )
        want = track_entities.apply(ctx(list(messages), now=float(now), state=fresh_state), cfg)
        assert got.state.to_json() == want.state.to_json()
        assert got.report == want.report
        orjson.dumps(got.state.to_json())  # storable: no lone surrogate kept
        kept_state, fresh_state = got.state, want.state
    if seed % 4 == 1 and cfg.max_seen_calls > 1000:  # the key twice is never evicted: no set kept
        assert True not in known
    else:  # of ~300 readings, half of them with nothing kept
        assert known.count(True) > 40


def test_a_state_whose_list_is_not_the_kept_one_makes_its_own_set() -> None:
    memo: ListMemo = {}
    messages = [system(), user("go"), assistant(None, shell("c1", "touch a")), result("c1", "ok")]
    first = track_entities.apply(
        ctx(messages, state=SessionState()).evolve(memo=memo), track_entities.Config()
    )
    meta = first.state.get(track_entities.META)
    assert memo[seen_calls.MEMO][0][1][0] is meta["seen"]
    copied = SessionState(
        {**first.state.data, track_entities.META: {**meta, "seen": list(meta["seen"])}}
    )
    calls = seen_calls.SeenCalls(memo, copied.get(track_entities.META)["seen"], 5000)
    assert not calls.known and calls.keys == set(meta["seen"])
    assert seen_calls.MEMO not in memo  # taken out while in use


def test_a_kept_set_is_not_taken_for_a_list_longer_than_the_cap() -> None:
    """The cap lowered while a set is kept (another configuration on the same memos): the kept
    set holds keys past the new cap, so the list is cut to the cap and its own set made."""
    stored = [f"k{n}" for n in range(10)]
    memo: ListMemo = {seen_calls.MEMO: [((), (stored, set(stored)))]}
    calls = seen_calls.SeenCalls(memo, stored, cap=4)
    assert not calls.known
    assert list(calls.stored) == stored[-4:] and calls.keys == set(stored[-4:])
    kept = seen_calls.SeenCalls({seen_calls.MEMO: [((), (stored, set(stored)))]}, stored, cap=10)
    assert kept.known and kept.keys == set(stored)
