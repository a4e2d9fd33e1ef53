"""The body memory reads a body exactly as parsing it whole does (the same value, the same key
order, the same error), whatever bodies came before: it reuses a kept body's items only where the
bytes prove them, and the validators run on the rest."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.errors import BadRequest
from proxy.protocols.body import MAX_JSON_DEPTH, parse_json, validate_body
from proxy.protocols.body_memory import PER_SLOT, BodyMemory
from proxy.protocols.validate import validate_anthropic, validate_responses

WIRES: dict[str, tuple[str, Callable[[dict[str, Any], int], None]]] = {
    "chat": ("messages", validate_body),
    "messages": ("messages", validate_anthropic),
    "responses": ("input", validate_responses),
}


DEEP = b"[" * 300 + b"]" * 300


def whole(raw: bytes, validate: Callable[[dict[str, Any], int], None]) -> Any:
    """What parsing ``raw`` whole gives: the body's bytes and key order, or the error."""
    try:
        body = parse_json(raw)
        validate(body, 0)
    except BadRequest as exc:
        return ("error", str(exc), exc.param, exc.code, exc.status)
    return ("body", orjson.dumps(body), list(body))


def read(memory: BodyMemory, raw: bytes, hint: str | None = "s") -> Any:
    try:
        body = memory.parse(raw, hint)
    except BadRequest as exc:
        return ("error", str(exc), exc.param, exc.code, exc.status)
    return ("body", orjson.dumps(body), list(body))


def chat(n: int, **extra: Any) -> dict[str, Any]:
    turns = [{"role": "system", "content": "You are terse."}]
    for i in range(n):
        turns.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} é"})
    return {"model": "gpt-5", "messages": turns, "tools": [{"type": "function"}], **extra}


def test_a_growing_conversation_reuses_what_it_shares() -> None:
    memory = BodyMemory("messages", validate_body)
    previous = memory.parse(orjson.dumps(chat(10)), "s")
    for n in (12, 14, 16):
        raw = orjson.dumps(chat(n))
        body = memory.parse(raw, "s")
        assert ("body", orjson.dumps(body), list(body)) == whole(raw, validate_body)
        # the shared messages are the very objects read before (they are not parsed again)
        assert all(a is b for a, b in zip(body["messages"], previous["messages"], strict=False))
        assert body["messages"] is not previous["messages"]  # each request its own list
        previous = body
    assert memory.reused == 3


def test_a_changed_last_message_and_changed_members_after_the_array() -> None:
    memory = BodyMemory("messages", validate_body)
    first = chat(8, stream=True)
    memory.parse(orjson.dumps(first), "s")
    second = chat(8, stream=False, user="u")  # members after the array changed
    second["messages"][-1] = {**second["messages"][-1], "cache_control": {"type": "ephemeral"}}
    raw = orjson.dumps(second)
    body = memory.parse(raw, "s")
    assert ("body", orjson.dumps(body), list(body)) == whole(raw, validate_body)
    assert memory.reused == 1


@pytest.mark.parametrize(
    "raw",
    [
        # a trailing comma after the shared messages: invalid JSON, as parsing whole says
        b'{"model":"m","messages":[{"role":"user","content":"a"},],"stream":true}',
        # the array closed after the shared message, then more items: invalid JSON
        b'{"model":"m","messages":[{"role":"user","content":"a"}]{"role":"user"}],"stream":true}',
        # the array named again after it: its last value is the body's
        b'{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],'
        b'"messages":[{"role":"user","content":"z"}]}',
        # a head member repeated after the array: last value, first place
        b'{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],'
        b'"model":"n"}',
        # the new message invalid: the error names its index
        b'{"model":"m","messages":[{"role":"user","content":"a"},{"role":"robot"}]}',
        # spaces: not written as orjson writes it (parsed whole, never reused)
        b'{"model":"m","messages":[{"role":"user","content":"a"}, {"role":"user","content":"b"}]}',
        b'{"model":"m","messages":[{"role":"user","content":"a"}]}  ',
        b'{"model":"m","messages":[{"role":"user","content":"a"}]',  # cut short
        b'{"model":"m","messages":[{"role":"user","content":"a"}]}}',
        b'{"model":"m","messages":[{"role":"user","content":"a"}]} {"model":"x"}',
        b'{"model":"m","messages":[{"role":"user","content":"a"}],"extra":'
        + b"[" * 300
        + b"]" * 300
        + b"}",
        b'{"model":"m","messages":[{"role":"user","content":"a"},'
        + b"[" * 300
        + b"]" * 300
        + b"]}",
    ],
)
def test_bodies_after_a_kept_one_read_as_parsing_them_whole(raw: bytes) -> None:
    memory = BodyMemory("messages", validate_body)
    memory.parse(b'{"model":"m","messages":[{"role":"user","content":"a"}],"stream":true}', "s")
    assert read(memory, raw) == whole(raw, validate_body)


def test_a_message_nested_too_deep_is_refused_with_the_limit() -> None:
    memory = BodyMemory("messages", validate_body)
    memory.parse(orjson.dumps(chat(2)), "s")
    deep: Any = "x"
    for _ in range(MAX_JSON_DEPTH - 2):
        deep = [deep]
    body = chat(2)
    body["messages"].append({"role": "user", "content": deep})
    raw = orjson.dumps(body)
    got = read(memory, raw)
    assert got == whole(raw, validate_body)
    assert got[0] == "error" and "nested" in got[1]
    body["messages"][-1]["content"] = deep[0]  # one level less: accepted
    raw = orjson.dumps(body)
    assert read(memory, raw) == whole(raw, validate_body) and read(memory, raw)[0] == "body"


def test_a_client_that_does_not_write_compactly_is_never_reused() -> None:
    memory = BodyMemory("messages", validate_body)
    for n in (4, 6, 8):
        raw = json.dumps(chat(n)).encode()  # ", " and ": "
        assert read(memory, raw) == whole(raw, validate_body)
    assert memory.reused == 0 and memory.held_bytes == 0


def test_sessions_and_bodies_per_slot_are_bounded() -> None:
    memory = BodyMemory("messages", validate_body, max_slots=3)
    for k in range(5):
        memory.parse(orjson.dumps(chat(4, user=f"u{k}")), f"s{k}")
    assert len(memory._slots) == 3 and ("", "s", "s0") not in memory._slots
    one = BodyMemory("messages", validate_body)
    for k in range(PER_SLOT + 3):  # different first messages, one session header
        body = chat(4)
        body["messages"][0]["content"] = f"system {k}"
        one.parse(orjson.dumps(body), "same")
    assert len(one._slots[("", "s", "same")]) == PER_SLOT
    held = sum(b.charge for bodies in one._slots.values() for b in bodies)
    assert one.held_bytes == held


def test_a_tenants_many_sessions_push_out_its_own_first() -> None:
    """Over the slots' bound the principal holding most slots loses its least recently used:
    bob's one session outlives alice's stream of new ones (all of them shared one LRU, and bob's
    next request was parsed whole)."""
    memory = BodyMemory("messages", validate_body, max_slots=4)
    memory.read(orjson.dumps(chat(4, user="bob")), "work", "bob")
    for k in range(10):
        memory.read(orjson.dumps(chat(4, user=f"a{k}")), f"s{k}", "alice")
        assert len(memory._slots) <= 4
    assert ("bob", "s", "work") in memory._slots
    assert ("alice", "s", "s9") in memory._slots and ("alice", "s", "s0") not in memory._slots
    held = sum(b.charge for bodies in memory._slots.values() for b in bodies)
    assert memory.held_bytes == held


def test_a_body_over_a_quarter_of_the_bound_is_not_kept() -> None:
    raw = orjson.dumps(chat(40))
    probe = BodyMemory("messages", validate_body)
    probe.parse(raw, "s")
    charge = probe.held_bytes
    assert charge >= 3 * len(raw)  # its bytes and its parsed objects
    memory = BodyMemory("messages", validate_body, max_bytes=charge * 3)
    memory.parse(raw, "s")
    assert memory.held_bytes == 0
    small = BodyMemory("messages", validate_body, max_bytes=charge * 5)
    small.parse(raw, "s")
    assert small.held_bytes == charge


def test_without_a_session_header_bodies_are_found_by_their_first_bytes() -> None:
    memory = BodyMemory("messages", validate_body)  # (their first KEY_BYTES: past the tail here)
    memory.parse(orjson.dumps(chat(30)), None)
    raw = orjson.dumps(chat(32))
    assert read(memory, raw, None) == whole(raw, validate_body)
    assert memory.reused == 1


# -- the property: any sequence of bodies reads as parsing each whole -----------------------

_text = st.text(alphabet=st.sampled_from('ab é\n"\\/\x01,]}:[{'), max_size=6)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", "robot"])},
    optional={"content": _json, "type": st.sampled_from(["message", "x"]), "x": _json},
)


@st.composite
def _edits(draw: st.DrawFn) -> list[bytes]:
    """A first body, then bodies made from the one before it (an agent's next turn or a moved
    mark), some written otherwise or damaged."""
    key = draw(st.sampled_from(["messages", "input"]))
    head = draw(st.dictionaries(st.sampled_from(["model", "a", key]), _json, max_size=2))
    head["model"] = draw(st.sampled_from(["m", "claude-x", 5]))
    head.pop(key, None)
    items = draw(st.lists(_message, min_size=1, max_size=5))
    rest = draw(
        st.dictionaries(st.sampled_from(["stream", "model", "tools", key]), _json, max_size=2)
    )
    out: list[bytes] = []
    for _ in range(draw(st.integers(1, 5))):
        members = [*head.items(), (key, items), *rest.items()]
        raw = b"{" + b",".join(orjson.dumps(k) + b":" + orjson.dumps(v) for k, v in members) + b"}"
        damage = draw(st.integers(0, 5))
        if damage == 1 and len(raw) > 2:  # cut short, or a byte changed
            at = draw(st.integers(1, len(raw) - 1))
            raw = raw[:at] + draw(st.sampled_from([b"", b",", b"]", b" ", b"}", b'"']))
        elif damage == 2:
            raw = raw.replace(b",", b", ", 1)
        out.append(raw)
        change = draw(st.integers(0, 3))
        if change == 0:
            items = items + draw(st.lists(_message, min_size=1, max_size=2))
        elif change == 1 and items:
            items = [*items[:-1], draw(_message)]
        elif change == 2:
            rest = draw(
                st.dictionaries(st.sampled_from(["stream", "model", key]), _json, max_size=2)
            )
        else:
            items = items[: draw(st.integers(0, len(items)))]
    return [key.encode(), *out]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_edits())
def test_any_sequence_of_bodies_reads_as_parsing_each_whole(case: list[bytes]) -> None:
    key, *raws = case
    name = "responses" if key == b"input" else "chat"
    validate = WIRES[name][1]
    memory = BodyMemory(key.decode(), validate)
    for raw in raws:
        assert read(memory, raw) == whole(raw, validate)
