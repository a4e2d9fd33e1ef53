"""``prefix.read_bytes``: the client messages' bytes read as one array and compared with the
previous request's in one piece give exactly what reading and comparing them one by one gives
(``message_bytes``, ``shared_bytes``), whatever changed near the end: a message appended, the last
one changed or gone, keys reordered, a ``True`` for a ``1``, a number that grew a digit, a value
that cannot be serialised, a message over the size limit."""

from __future__ import annotations

import copy
import random
from typing import Any

import orjson
import pytest

from proxy.protocols import prefix
from proxy.protocols.anthropic import AnthropicAdapter
from proxy.protocols.prefix import Whole, message_bytes, read_bytes, shared_bytes

LEAVES: list[Any] = [1, 12, True, 1.5, None, "a", 'a,"b"]', "x" * 40, "é,}", 0, False]


def _value(rng: random.Random, depth: int = 0) -> Any:
    if depth < 2 and rng.random() < 0.3:
        return {f"k{i}": _value(rng, depth + 1) for i in range(rng.randint(0, 3))}
    if depth < 2 and rng.random() < 0.2:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return rng.choice(LEAVES)


def _message(rng: random.Random) -> Any:
    if rng.random() < 0.1:  # a loose item: a number, a string …
        return rng.choice(LEAVES)
    return {"role": rng.choice(["user", "assistant"]), "content": _value(rng)}


def _changed(rng: random.Random, m: Any) -> Any:
    """``m`` changed in one of the ways bytes tell apart (equal or not as Python values)."""
    kind = rng.randrange(6)
    if kind == 0 and isinstance(m, dict) and len(m) > 1:
        return dict(reversed(list(m.items())))  # equal as a dict, not as bytes
    if kind == 1:
        return {"role": "user", "content": True} if m == {"role": "user", "content": 1} else 1
    if kind == 2 and isinstance(m, int) and not isinstance(m, bool):
        return m * 10 + 3  # its bytes a prefix of the new ones'
    if kind == 3:
        return {"role": "user", "content": "\ud800"}  # a lone surrogate: not JSON
    if kind == 4:
        return {"role": "user", "content": "y" * 300}  # over the limit below
    out = copy.deepcopy(m)
    return {"changed": out}


def _expected_ends(datas: list[bytes | None]) -> list[int]:
    ends, pos = [], 0
    for d in datas:
        if d is None:
            break
        pos += 1 + len(d)
        ends.append(pos)
    return ends


def _read(prev: Whole | None, prev_datas: list[bytes | None], msgs: list[Any]) -> Any:
    datas, shared, whole = read_bytes(prev, prev_datas, msgs, 200)
    want = message_bytes(msgs, 200)
    assert datas == want
    assert shared == (shared_bytes(prev_datas, want) if prev_datas else 0)
    if whole is not None:
        assert whole.ends == _expected_ends(want)
        known = len(whole.ends)
    if whole is not None and whole.data is not None:  # (None: read by its objects)
        assert whole.data[: whole.ends[-1]] == b"[" + b",".join(want[:known])  # type: ignore[arg-type]
        if known == len(want):
            assert whole.data == orjson.dumps(msgs)
    return datas, shared, whole


@pytest.mark.parametrize("objects", ["copied", "same"])
def test_read_as_one_array_is_read_one_by_one(
    monkeypatch: pytest.MonkeyPatch, objects: str
) -> None:
    """Messages as new objects each request are compared in one piece; the previous request's
    very objects (as ``body_memory`` hands them out) are not even written again."""
    rng = random.Random(41)
    hits: list[int] = []
    spied = "_shared_whole" if objects == "copied" else "_same_objects"
    real = getattr(prefix, spied)

    def spy(prev: Whole, data: Any) -> int:
        hits.append(real(prev, data))
        return hits[-1]

    monkeypatch.setattr(prefix, spied, spy)
    for _ in range(3000):
        msgs = [_message(rng) for _ in range(rng.randint(1, 8))]
        datas, _, whole = _read(None, [], msgs)
        for _ in range(3):
            new = list(msgs)
            for _ in range(rng.randint(0, 2)):  # changes near the end, or anywhere
                if new and rng.random() < 0.6:
                    j = max(0, len(new) - rng.randint(1, 4))
                    new[j] = _changed(rng, new[j])
                elif new and rng.random() < 0.3:
                    new.pop()
            new += [_message(rng) for _ in range(rng.choice([0, 0, 1, 2]))]
            if new and objects == "copied":
                new = copy.deepcopy(new)
            if new:
                msgs, (datas, _, whole) = new, _read(whole, datas, new)
    assert sum(k > 0 for k in hits) > 2000  # read in one piece
    assert sum(k == 0 for k in hits) > 500  # and one by one


def test_large_unkept_messages_do_not_cost_the_snapshot() -> None:
    """Messages over the per-message limit (screenshots) are never kept nor compared, so the
    array read in one piece is kept only up to the first of them: they cost the session's
    snapshot nothing, and a conversation with megabytes of them keeps its reuse."""
    adapter = AnthropicAdapter()
    big = "A" * 1_000_000  # each over the adapter's per-message limit: never kept anyway
    msgs: list[Any] = []
    for i in range(20):
        msgs += [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
    for i in range(13):
        image = {"type": "base64", "media_type": "image/png", "data": big + str(i)}
        msgs += [{"role": "user", "content": [{"type": "image", "source": image}]},
                 {"role": "assistant", "content": f"ok{i}"}]  # fmt: skip
    shared = []
    for r in range(4):
        msgs += [{"role": "user", "content": f"more{r}"}, {"role": "assistant", "content": "x"}]
        lowered = adapter.lower({"model": "m", "messages": list(msgs)}, session="S")
        shared.append(lowered.state.shared)
    assert shared[1:] == [40, 40, 40]  # the 40 small messages before the first image, each time
