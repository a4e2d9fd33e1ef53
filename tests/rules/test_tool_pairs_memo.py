"""``tool_pairs.pairs_of`` and ``observations.of_context``, extended from the session's kept
lists, equal ``messages.tool_pairs`` and ``observations`` of the whole list over random
sessions: calls answered later, before their call, twice or never, ids missing or repeated,
lists that grow, change, shrink or belong to another session."""

from __future__ import annotations

import random
from typing import Any

from rules.activity.observations import observations, of_context
from rules.base import Context, ListMemo, Message
from rules.messages import tool_pairs
from rules.tool_pairs import NAME, pairs_of, scan, scan_of


def _id(rng: random.Random, n: int) -> Any:
    roll = rng.random()
    if roll < 0.05:
        return None  # no id (an empty one pairs as "")
    if roll < 0.1:
        return 7  # not a string
    return f"c{rng.randrange(max(n, 1))}" if roll < 0.35 else f"c{n}"  # repeated, or new


def _function(rng: random.Random, n: int) -> dict[str, Any]:
    name, args = rng.choice(
        [
            ("read_file", f'{{"path": "/w/f{n % 7}.py"}}'),
            ("run_shell", f'{{"command": "pytest -q tests/t{n % 5}.py"}}'),
            ("apply_patch", '{"patch": "*** Begin Patch"}'),
        ]
    )
    return {"name": name, "arguments": args}


def message(rng: random.Random, n: int) -> Message:
    kind = rng.random()
    if kind < 0.35:
        calls: list[Any] = [
            {"id": _id(rng, n + k), "type": "function", "function": _function(rng, n + k)}
            for k in range(3)
        ]
        calls = calls[: rng.randint(1, 3)]
        if rng.random() < 0.05:
            calls.append("not a call")
        return {"role": "assistant", "content": "", "tool_calls": calls}
    if kind < 0.75:
        tid = _id(rng, n) if rng.random() < 0.9 else ""
        content = rng.choice([f"out {n}", "Exit code: 1\nFAILED", "error: patch failed"])
        return {"role": "tool", "tool_call_id": tid, "content": content}
    if kind < 0.8:
        return {"role": "assistant", "content": "text", "tool_calls": "not a list"}
    return {"role": rng.choice(["user", "assistant", "system"]), "content": f"text {n}"}


def sessions(seed: int, steps: int = 300) -> list[list[Message]]:
    rng = random.Random(seed)
    history: list[Message] = [{"role": "system", "content": "sys"}]
    out = []
    for n in range(steps):
        op = rng.random()
        if op < 0.6:  # the next request: the same objects and a few more
            history = [*history, *(message(rng, n * 10 + k) for k in range(rng.randint(1, 3)))]
        elif op < 0.7 and len(history) > 2:  # an earlier message resent changed
            i = rng.randrange(1, len(history))
            history = [*history[:i], message(rng, n * 10), *history[i + 1 :]]
        elif op < 0.8 and len(history) > 4:  # compacted: the oldest dropped
            history = [history[0], *history[rng.randrange(2, len(history) - 1) :]]
        elif op < 0.85 and len(history) > 3:  # shorter: a retry of an earlier turn
            history = history[: rng.randrange(2, len(history))]
        elif op < 0.9:
            history = list(history)  # the same objects, a list of its own
        elif op < 0.95:  # another session's list
            out.append([message(rng, n * 10 + k) for k in range(rng.randint(1, 8))])
            continue
        out.append(history)
    return out


def test_pairs_of_is_tool_pairs_of_the_whole_list() -> None:
    extended = answered_late = 0
    for seed in range(8):
        memo: ListMemo = {}
        for messages in sessions(seed):
            kept = [len(seen) for seen, _ in memo.get(NAME) or ()]
            want = tool_pairs(messages)
            ctx = Context(messages=messages, model="m", tokens=None, now=0.0, memo=memo)  # type: ignore[arg-type]
            assert pairs_of(ctx) == want
            assert pairs_of(ctx) is pairs_of(ctx)  # one answer per list
            extended += any(0 < k < len(messages) for k in kept)
            answered_late += any(c < r for c, _, r in want if r is not None)
    assert extended > 500 and answered_late  # the shortcut was taken, answers came later


def test_scan_from_a_base_is_the_whole_scan() -> None:
    rng = random.Random(3)
    for n in range(300):
        messages = [message(rng, n * 100 + k) for k in range(rng.randint(0, 30))]
        cut = rng.randint(0, len(messages))
        whole = scan(messages)
        assert whole.pairs == tool_pairs(messages)
        grown = scan(messages, scan(messages[:cut]), cut)
        assert (grown.pairs, grown.answered, grown.open) == (
            whole.pairs,
            whole.answered,
            whole.open,
        )
        if cut:  # what changed since the base: the pairs a pair of it differs from, and new
            was = scan(messages[:cut]).pairs
            changed = [i for i, p in enumerate(whole.pairs) if i >= len(was) or p != was[i]]
            assert list(grown.fresh) == changed


def test_a_base_is_never_changed() -> None:
    first = [
        {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]},
        {"role": "tool", "tool_call_id": "a", "content": "x"},
    ]
    base = scan(first)
    before = (list(base.pairs), dict(base.answered), base.open)
    grown = scan([*first, {"role": "tool", "tool_call_id": "b", "content": "y"}], base, 2)
    assert grown.pairs[1][2] == 2 and not grown.open
    assert (base.pairs, base.answered, base.open) == before


def test_of_context_is_observations_of_the_whole_list() -> None:
    taken = 0
    for seed in range(8):
        memo: ListMemo = {}
        tables: dict[str, dict[int, tuple[Any, Any]]] = {}
        for messages in sessions(seed):
            ctx = Context(messages=messages, model="m", tokens=None, now=0.0, memo=memo,  # type: ignore[arg-type]
                          tables=tables)  # fmt: skip
            assert of_context(ctx) == observations(messages)
            taken += scan_of(ctx).start > 0
    assert taken > 500


def test_observations_are_taken_over_only_from_the_list_the_pairs_were() -> None:
    """The pairs were last scanned on one list, the observations made of another as long: the
    next list, the first one and more, takes the pairs over, not the other's observations."""
    memo: ListMemo = {}
    tables: dict[str, dict[int, tuple[Any, Any]]] = {}

    def ctx(messages: list[Message]) -> Context:
        return Context(messages=messages, model="m", tokens=None, now=0.0, memo=memo,  # type: ignore[arg-type]
                       tables=tables)  # fmt: skip

    def turn(cid: str, path: str) -> list[Message]:
        args = f'{{"path": "{path}"}}'
        call = {"id": cid, "type": "function", "function": {"name": "read_file", "arguments": args}}
        return [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": cid, "content": "x"},
        ]

    first = [{"role": "user", "content": "go"}, *turn("a", "/w/a.py")]
    other = [{"role": "user", "content": "go"}, *turn("b", "/w/b.py")]
    pairs_of(ctx(first))
    of_context(ctx(other))
    grown = [*first, *turn("c", "/w/c.py")]
    assert scan_of(ctx(grown)).start == len(first)
    assert of_context(ctx(grown)) == observations(grown)
