"""The body memory: crafted bodies after a kept one read exactly as parsing
them whole; the accounting holds under interleaved parses; the kept bodies still match their
bytes after requests through the server (nothing downstream changed a shared parsed object).

Tests marked ``# Failed on b492420 (fixed):`` showed bugs: a slot shared by two conversations
reused only what they have in common (not the longest shared prefix, as documented), and what the
body memory and the adapters' prefix snapshots charged fell well short of what they keep alive."""

from __future__ import annotations

import gc
import random
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.protocols.anthropic import AnthropicAdapter
from proxy.protocols.body import MAX_JSON_DEPTH, parse_json, validate_body
from proxy.protocols.body_memory import PER_SLOT, BodyMemory, Kept, _suffix
from proxy.protocols.validate import validate_anthropic, validate_responses
from tests.conftest import in_process
from tests.proxy.protocols.test_body_memory import read, whole
from tests.proxy.server.test_body_reuse import CASES, anthropic_turns
from tests.support.edge_upstream import EdgeUpstream, protocol_settings

A = b'{"role":"user","content":"a"}'
B = b'{"role":"user","content":"b"}'
CHAT_KEPT = b'{"model":"m","messages":[' + A + b'],"stream":true}'


def _after_a(middle: bytes, tail: bytes = b'],"stream":true}') -> bytes:
    return b'{"model":"m","messages":[' + A + middle + tail


CHAT_CRAFTED = [
    # duplicate keys inside a new item (last value, first place), either way round
    _after_a(b',{"role":"user","role":"robot"}'),
    _after_a(b',{"role":"robot","role":"user","content":"b"}'),
    _after_a(b',{"content":"b","role":"user","content":"c"}'),
    # duplicate keys after the array, one whose first value ends in ``]`` like the suffix
    _after_a(b"", b'],"stream":true,"stream":false}'),
    _after_a(b"," + B, b'],"x":[],"x":5}'),
    _after_a(b"," + B, b'],"x":[],"x":[]}'),
    _after_a(b"," + B, b'],"messages":[{"role":"robot"}]}'),
    _after_a(b"," + B, b'],"messages":[' + B + b'],"stream":true}'),
    _after_a(b"," + B, b'],"model":""}'),
    _after_a(b"," + B, b'],"stream":true,"model":"n"}'),
    _after_a(b"," + B, b'],"model":"n","stream":true}'),
    # the array key before the head, then again
    b'{"messages":5,"model":"m","messages":[' + A + b"," + B + b'],"stream":true}',
    # whitespace: between items, before the ``]``, after the ``}``, a newline
    _after_a(b" ," + B),
    _after_a(b", " + B),
    _after_a(b",\n" + B),
    _after_a(b"," + B + b" "),
    _after_a(b"," + B, b'] ,"stream":true}'),
    _after_a(b"," + B, b'],"stream":true} '),
    _after_a(b"," + B, b'],"stream" : true}'),
    # trailing commas
    _after_a(b"," + B + b","),
    _after_a(b',{"role":"user","content":"b",}'),
    _after_a(b",,"),
    _after_a(b","),
    # the kept suffix inside a string of the new item, brackets in strings
    _after_a(b',{"role":"user","content":"],\\"stream\\":true}"}'),
    _after_a(b',{"role":"user","content":"b]"}'),
    _after_a(b',{"role":"user","content":"}]},{\\"role\\":\\"robot\\"}"}'),
    # keys with escaped quotes, escapes of plain characters, unicode written both ways
    _after_a(b',{"role":"user","content":"b","k\\"ey":1}'),
    _after_a(b',{"rol\\u0065":"user","content":"b"}'),
    _after_a(b',{"role":"us\\u0065r","content":"\\u00e9\\/"}'),
    _after_a(b',{"role":"user","content":"\xc3\xa9/"}'),
    _after_a(b',{"role":"user","content":"\\ud800"}'),  # a lone surrogate: invalid JSON
    _after_a(b',{"role":"user","content":"\\ud83d\\ude00"}'),
    _after_a(b',{"role":"user","content":"\xff"}'),  # not UTF-8
    # numbers written otherwise than orjson writes them
    _after_a(b',{"role":"user","content":"b","n":18446744073709551616}'),
    _after_a(b',{"role":"user","content":"b","n":1E2}'),
    _after_a(b',{"role":"user","content":"b","n":1.0}'),
    _after_a(b',{"role":"user","content":"b","n":-0.0}'),
    _after_a(b',{"role":"user","content":"b","n":-0}'),
    _after_a(b',{"role":"user","content":"b","n":1e400}'),
    # a new item that is not an object, or a wrong shape
    _after_a(b",5"),
    _after_a(b',{"role":"user","content":5}'),
    _after_a(b',{"role":"user","tool_calls":{}}'),
    # shorter than the kept end, cut at it, or the kept body with more after it
    b'{"model":"m","messages":[{"role":"user","content":"a"',
    b'{"model":"m","messages":[' + A,
    b'{"model":"m","messages":[' + A + b"]",
    CHAT_KEPT + b"{}",
    CHAT_KEPT + b"]",
    CHAT_KEPT[:-1],
    # the kept body itself, fewer items, an empty array, the array closed and reopened
    CHAT_KEPT,
    b'{"model":"m","messages":[],"stream":true}',
    _after_a(b"", b'],"stream":true,"tools":{}}'),
    _after_a(b"]" + b"[" + B),
    # bytes equal to the kept prefix, a structure that differs after it
    _after_a(b'}],"stream":true}'),
    _after_a(b":1}"),
]


@pytest.mark.parametrize("raw", CHAT_CRAFTED)
@pytest.mark.parametrize("validate", [validate_body, validate_anthropic])
def test_crafted_chat_bodies_after_a_kept_one_read_as_parsed_whole(
    raw: bytes, validate: Callable[[dict[str, Any], int], None]
) -> None:
    memory = BodyMemory("messages", validate)
    memory.parse(CHAT_KEPT, "s")
    assert read(memory, raw) == whole(raw, validate)
    again = BodyMemory("messages", validate)  # and kept after a body that grew from it
    again.parse(CHAT_KEPT, "s")
    again.parse(_after_a(b"," + B), "s")
    assert read(again, raw) == whole(raw, validate)


I1 = b'{"type":"message","role":"user","content":"a"}'
I2 = b'{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}'
RESPONSES_KEPT = b'{"model":"m","instructions":"be brief","input":[' + I1 + b'],"stream":true}'
RESPONSES_CRAFTED = [
    b'{"model":"m","instructions":"be brief","input":[' + I1 + b"," + I2 + b'],"stream":true}',
    b'{"model":"m","instructions":"be brief","input":[' + I1 + b"," + I2 + b'],"input":"s"}',
    b'{"model":"m","instructions":"be brief","input":[' + I1 + b'],"instructions":5}',
    b'{"model":"m","instructions":"be brief","input":[' + I1 + b',"s"],"stream":true}',
    b'{"model":"m","instructions":"be brief","input":[' + I1 + b',{"content":7}]}',
    b'{"model":"m","instructions":"be brief","input":[],"stream":true}',
    b'{"model":"m","instructions":"be brief","input":"just text"}',
    b'{"model":"m","instructions":"be brief","input":[' + I1 + b"]}",
    b'{"model":"m","instructions":"be brief","input":[' + I1 + b'],"tools":{}}',
]


@pytest.mark.parametrize("raw", RESPONSES_CRAFTED)
def test_crafted_responses_bodies_after_a_kept_one_read_as_parsed_whole(raw: bytes) -> None:
    memory = BodyMemory("input", validate_responses)
    memory.parse(RESPONSES_KEPT, None)
    assert read(memory, raw, None) == whole(raw, validate_responses)


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", range(MAX_JSON_DEPTH - 4, MAX_JSON_DEPTH + 2))
@pytest.mark.parametrize("where", ["after the array", "in a new item", "a new item's content"])
def test_nesting_at_the_limit_reads_as_parsed_whole(depth: int, where: str) -> None:
    memory = BodyMemory("messages", validate_body)
    memory.parse(CHAT_KEPT, "s")
    messages: list[Any] = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    body: dict[str, Any] = {"model": "m", "messages": messages, "stream": True}
    if where == "after the array":
        body["deep"] = _nested(depth)
    elif where == "in a new item":
        messages[1]["x"] = _nested(depth)
    else:
        messages[1]["content"] = _nested(depth)
    raw = orjson.dumps(body)
    assert read(memory, raw) == whole(raw, validate_body)


def _held(memory: BodyMemory) -> int:
    return sum(k.charge for bodies in memory._slots.values() for k in bodies)


def _chat(session: int, turns: int, system: str = "You are terse.") -> bytes:
    messages = [{"role": "system", "content": system}]
    for i in range(turns):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"session {session} turn {i}"})
    return orjson.dumps({"model": "gpt-5", "messages": messages, "stream": False})


def test_interleaved_parses_in_threads_keep_the_accounting_and_the_reads() -> None:
    """Parse is called from the event loop; run from threads anyway, nothing breaks."""
    memory = BodyMemory("messages", validate_body, max_bytes=60_000, max_slots=5)
    failures: list[Any] = []

    def agent(seed: int) -> None:
        rng = random.Random(seed)
        for turn in range(1, 40):
            raw = _chat(seed % 4, turn + rng.randrange(3))
            hint = rng.choice([None, f"s{seed % 4}", "shared"])
            if read(memory, raw, hint) != whole(raw, validate_body):
                failures.append(raw)

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert memory.held_bytes == _held(memory) <= memory.max_bytes
    assert len(memory._slots) <= memory.max_slots
    assert all(len(bodies) <= PER_SLOT for bodies in memory._slots.values())


def _still_proven(memory: BodyMemory, kept: Kept) -> None:
    """A kept body's head, proven items and trailing members are still what its bytes say."""
    opening = orjson.dumps(dict(kept.head))[:-1] + (b"," if kept.head else b"")
    opening += orjson.dumps(memory.key) + b":["
    items = b",".join(orjson.dumps(x) for x in kept.items[: len(kept.ends)])
    assert kept.raw[: kept.ends[-1]] == opening + items
    if kept.close >= 0:
        assert kept.raw[kept.close :] == _suffix(kept.rest)


@pytest.mark.parametrize("protocol", sorted(CASES))
async def test_kept_bodies_still_match_their_bytes_after_requests_through_the_server(
    edge: EdgeUpstream, tmp_path: Path, protocol: str
) -> None:
    """The rules rewrite these requests (the last one's injected context): were anything
    downstream to change a parsed body in place, the kept objects would no longer match."""
    path, turns, reply = CASES[protocol]
    edge.reply = reply
    async with in_process(protocol_settings(edge), str(tmp_path / "log")) as client:
        memory = client.app.state.handlers[protocol].bodies  # type: ignore[attr-defined]
        for k in range(1, 7):
            raw = orjson.dumps(turns(k))
            headers = {"content-type": "application/json", "x-session-id": "one"}
            answer = await client.post(path, content=raw, headers=headers)
            assert answer.status_code == 200, answer.text
        assert memory.reused == 5
        kept = [k for bodies in memory._slots.values() for k in bodies]
        assert kept
        for body in kept:
            _still_proven(memory, body)
    forwarded = [orjson.loads(seen.body) for seen in edge.seen]
    assert forwarded[-1] != orjson.loads(orjson.dumps(turns(6)))  # the rules did rewrite it


# -- bugs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("hint", [None, "same"])
def test_conversations_sharing_a_slot_each_reuse_their_own_prefix(hint: str | None) -> None:
    # Failed on b492420 (fixed): ``BodyMemory.parse`` took the first kept body of the slot that
    # reads (the newest), not the one sharing the longest prefix, as the module documents ("the
    # longest shared prefix wins"); it then replaces that body with this one. Two conversations
    # in one slot (no session header and the same first 512 bytes: the same long system prompt;
    # or sub-agents under one session header) alternate, and each request reuses only their
    # common system message: every other item is parsed and validated again, every time.
    memory = BodyMemory("messages", validate_body)
    system = "You are a careful agent. " * 40  # the slot's first 512 bytes
    last: dict[int, dict[str, Any]] = {}
    for turns in range(2, 12, 2):
        for session in (1, 2):
            body = memory.parse(_chat(session, turns, system), hint)
            previous = last.get(session)
            if previous is not None:
                shared = previous["messages"]
                assert all(a is b for a, b in zip(body["messages"], shared, strict=False)), (
                    f"session {session}, {turns} turns: only the common prefix was reused"
                )
            last[session] = body


def _retained(make: Callable[[], Any]) -> tuple[int, Any]:
    """The bytes the value ``make`` returns keeps alive, and the value."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        value = make()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, value
    finally:
        tracemalloc.stop()


def test_the_body_memory_charges_what_an_agents_body_keeps_alive() -> None:
    # Failed on b492420: COST_FACTOR = 3 (the raw bytes and ~2× for the parsed objects) was
    # measured on the bench's text-heavy bodies. An agent's conversation of tool calls and short
    # results (this repo's own Claude Code-shaped fixture) parses to ~6–7× its bytes: the
    # memory keeps ~2.2× what it is charged, so ``max_bytes`` (128 MB) holds ~280 MB.
    raw = orjson.dumps(anthropic_turns(300))
    memory = BodyMemory("messages", validate_anthropic)
    retained, _ = _retained(lambda: memory.parse(raw, "s"))
    assert memory.held_bytes == sum(k.charge for bodies in memory._slots.values() for k in bodies)
    assert retained <= memory.held_bytes * 1.5, (retained, memory.held_bytes)


def test_a_prefix_snapshot_is_charged_for_the_client_objects_it_holds() -> None:
    # Failed on b492420 (fixed): ``prefix.Whole`` now holds the request's parsed client messages
    # (``items``, for ``_same_objects``), but ``Whole.cost`` charges only its bytes. An
    # Anthropic snapshot, charged about what it pinned before (~0.97×), now keeps ~2.4× its cost
    # alive: the parsed messages outlive the request (for a client not written compactly, or
    # once the body memory dropped the body, nothing else charges them), and the adapters'
    # prefix memories (48 MB each) exceed their bound.
    adapter = AnthropicAdapter()
    raw = orjson.dumps(anthropic_turns(300))
    gc.collect()
    tracemalloc.start()  # traced from before the body is parsed: what is freed is counted
    try:
        body = parse_json(raw)
        adapter.lower(body, "s")
        del body
        (slot,) = list(adapter.prefixes._slots._entries)  # (its snapshot is not bound here)
        cost = adapter.prefixes.held_bytes
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        adapter.prefixes.put(slot, None, 0)  # the snapshot dropped
        gc.collect()
        freed = held - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert freed <= cost * 1.5, (freed, cost)
