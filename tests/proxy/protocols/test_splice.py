"""A rewrite's bytes spliced from the client's are ``orjson.dumps`` of the rewrite, byte for
byte, whatever it kept, dropped, moved, copied or replaced, and runs of the client's messages are
copied in one piece."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.protocols import splice
from proxy.protocols.body import validate_body
from proxy.protocols.body_memory import BodyMemory
from proxy.protocols.splice import written

_text = st.text(alphabet=st.sampled_from('ab é\n"\\,]}'), max_size=5)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=5,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"])}, optional={"content": _json}
)


@st.composite
def _case(draw: st.DrawFn) -> tuple[str, list[bytes], Any]:
    key = draw(st.sampled_from(["messages", "input"]))
    head = {"model": "m", **draw(st.dictionaries(st.sampled_from(["a", "b"]), _json, max_size=2))}
    rest = draw(st.dictionaries(st.sampled_from(["x", "stream"]), _json, max_size=2))
    items = draw(st.lists(_message, min_size=1, max_size=6))
    raws = [orjson.dumps({**head, key: items, **rest})]
    if draw(st.booleans()):  # the members after the array not as orjson writes them
        raws[0] = raws[0][:-1] + b" }"
    if draw(st.booleans()):  # a next request, read from the first (the reuse path)
        raws.append(orjson.dumps({**head, key: [*items, *draw(st.lists(_message, max_size=2))]}))
    return key, raws, draw(st.randoms(use_true_random=False))


@settings(max_examples=500, deadline=None)
@given(_case())
def test_a_spliced_rewrite_is_its_serialisation(case: tuple[str, list[bytes], Any]) -> None:
    key, raws, rng = case
    memory = BodyMemory(key, lambda body, start: None)  # any JSON: splicing does not validate
    for raw in raws:
        body, kept = memory.read(raw, "s")
    own = body[key]
    out: list[Any] = []
    for _ in range(rng.randint(0, len(own) + 2)):  # the client's, moved, copied or new
        pick = rng.random()
        if own and pick < 0.6:
            out.append(own[rng.randrange(len(own))])
        elif own and pick < 0.8:
            out.append(copy.deepcopy(own[rng.randrange(len(own))]))
        else:
            out.append({"role": "user", "content": f"new {rng.random()}"})
    if rng.random() < 0.5:
        out = [*own[: rng.randint(0, len(own))], *out]  # a prefix kept, as rules keep it
    forwarded = dict(body)
    forwarded[key] = out
    for name in list(forwarded):
        if name != key and rng.random() < 0.2:
            forwarded[name] = {"replaced": rng.random()}
    assert written(forwarded, body, kept, key) == orjson.dumps(forwarded)
    assert written(forwarded, body, None, key) == orjson.dumps(forwarded)
    forwarded["added"] = 1  # a member the body has not: written whole
    assert written(forwarded, body, kept, key) == orjson.dumps(forwarded)


def test_the_clients_messages_are_copied_in_runs(monkeypatch: Any) -> None:
    memory = BodyMemory("messages", validate_body)
    messages = [{"role": "user", "content": f"turn {i}"} for i in range(50)]
    raw = orjson.dumps({"model": "m", "messages": messages, "stream": True})
    body, kept = memory.read(raw, "s")
    own = body["messages"]
    forwarded = {**body, "messages": [*own[:30], {"role": "user", "content": "pruned"}, *own[31:]]}
    writes: list[Any] = []
    real = orjson.dumps

    def counted(value: Any, *args: Any) -> bytes:
        writes.append(value)
        return real(value, *args)

    monkeypatch.setattr(splice.orjson, "dumps", counted)
    data = written(forwarded, body, kept, "messages")
    monkeypatch.setattr(splice.orjson, "dumps", real)
    assert data == orjson.dumps(forwarded)
    assert writes == [{"role": "user", "content": "pruned"}]  # nothing else written again
