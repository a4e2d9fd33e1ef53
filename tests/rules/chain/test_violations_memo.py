"""``validator.violations_of``, taken over from the session's kept lists up to their last unit,
equals ``find_violations`` of the whole list with nothing kept, over random sessions whose lists
grow by calls and results (answered at once, later, twice, never, out of their block), change,
shrink or belong to another session."""

from __future__ import annotations

import random
from typing import Any

import orjson

from rules.base import Context, ListMemo, Message
from rules.chain.validator import VIOLATIONS, check, find_violations, violations_of


def call(rng: random.Random, cid: Any) -> Any:
    roll = rng.random()
    args = orjson.dumps({"a": 1}).decode() if roll > 0.05 else "[1]"
    if roll < 0.03:
        return "not a call"
    return {"id": cid, "type": "function", "function": {"name": "run", "arguments": args}}


def an_id(rng: random.Random, n: int) -> Any:
    roll = rng.random()
    if roll < 0.03:
        return None
    if roll < 0.06:
        return "bad id!"
    return f"c{rng.randrange(max(n, 1))}" if roll < 0.2 else f"c{n}"  # repeated, or new


def turn(rng: random.Random, n: int) -> list[Message]:
    """An agent's turn: mostly a call and its result, sometimes not as providers want."""
    roll = rng.random()
    if roll < 0.55:
        cid = an_id(rng, n)
        return [
            {"role": "assistant", "content": "", "tool_calls": [call(rng, cid)]},
            {"role": "tool", "tool_call_id": cid, "content": f"out {n}"},
        ]
    if roll < 0.65:  # several calls; their results may come in the next request
        ids = [an_id(rng, n * 10 + k) for k in range(rng.randint(2, 3))]
        out: list[Message] = [
            {"role": "assistant", "content": "", "tool_calls": [call(rng, c) for c in ids]}
        ]
        return out + [{"role": "tool", "tool_call_id": c, "content": "r"} for c in ids
                      if rng.random() < 0.6]  # fmt: skip
    if roll < 0.8:  # a result alone (the answer of an earlier call, an orphan, a repeat)
        content = None if rng.random() < 0.1 else "late"
        return [{"role": "tool", "tool_call_id": an_id(rng, n), "content": content}]
    if roll < 0.85:
        return [{"role": "assistant", "content": "", "tool_calls": rng.choice([[], "x"])}]
    if roll < 0.9:
        return [{"role": "assistant", "content": ""}]  # empty
    return [{"role": rng.choice(["user", "assistant"]), "content": f"text {n}"}]


def sessions(seed: int, steps: int = 250) -> list[list[Message]]:
    rng = random.Random(seed)
    history: list[Message] = [{"role": "system", "content": "sys"}]
    out = []
    for n in range(steps):
        op = rng.random()
        if op < 0.65:
            history = [*history, *turn(rng, n)]
        elif op < 0.72 and len(history) > 2:  # an earlier message resent changed
            i = rng.randrange(1, len(history))
            history = [*history[:i], *turn(rng, n)[:1], *history[i + 1 :]]
        elif op < 0.8 and len(history) > 4:  # compacted: the oldest dropped
            history = [history[0], *history[rng.randrange(2, len(history) - 1) :]]
        elif op < 0.85 and len(history) > 3:  # shorter: a retry of an earlier turn
            history = history[: rng.randrange(2, len(history))]
        elif op < 0.9:
            history = list(history)  # the same objects, a list of its own
        elif op < 0.95:  # another session's list
            out.append([m for k in range(rng.randint(1, 4)) for m in turn(rng, n * 10 + k)])
            continue
        out.append(history)
    return out


def test_violations_of_is_find_violations_of_the_whole_list() -> None:
    taken = kinds = 0
    found: set[str] = set()
    for seed in range(10):
        memo: ListMemo = {}
        for messages in sessions(seed):
            kept = [len(seen) for seen, _ in memo.get(VIOLATIONS) or ()]
            want = find_violations(messages)
            ctx = Context(messages=messages, model="m", tokens=None, now=0.0, memo=memo)  # type: ignore[arg-type]
            assert violations_of(ctx) == want
            taken += any(0 < k < len(messages) for k in kept)
            found.update(v["kind"] for v in want)
    kinds = len(found)
    assert taken > 800  # taken over from a kept list, most requests
    assert kinds >= 8, found  # the walks met most kinds of violation


def test_check_from_any_cut_is_the_whole_check() -> None:
    rng = random.Random(5)
    for n in range(400):
        messages = [m for k in range(rng.randint(0, 12)) for m in turn(rng, n * 100 + k)]
        cut = rng.randint(0, len(messages))
        assert check(messages, None, check(messages[:cut])).violations == find_violations(messages)
