"""Two tool calls streamed in parallel by an OpenAI chat upstream, their argument deltas
interleaved (index 0, 1, 0, 1 …), reach an Anthropic Messages client through the bridge as two
tool_use blocks, each with its own whole arguments."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import orjson
import pytest

from proxy.settings import UpstreamSettings
from proxy.upstream.anthropic import messages
from proxy.upstream.openai import UpstreamClient
from tests.support.anthropic_upstream import sse_reply
from tests.support.edge_upstream import sse

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

KEY = "sk-test-bridge-000000000"
CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o"}
BODY = {
    "model": "gpt-4o",
    "max_tokens": 100,
    "stream": True,
    "messages": [{"role": "user", "content": "read both"}],
    "tools": [{"name": "read", "input_schema": {"type": "object"}}],
}


@pytest.fixture
async def client() -> AsyncIterator[UpstreamClient]:
    c = UpstreamClient()
    yield c
    await c.aclose()


def _call(index: int, **delta: object) -> dict[str, object]:
    calls = [{"index": index, **delta}]
    return {**CHUNK, "choices": [{"index": 0, "delta": {"tool_calls": calls}}]}


def _args(index: int, text: str) -> dict[str, object]:
    return _call(index, function={"arguments": text})


def _blocks(data: bytes) -> dict[int, dict[str, object]]:
    """Each tool_use block's id, name and its arguments joined, by the block's index."""
    blocks: dict[int, dict[str, object]] = {}
    for line in data.split(b"\n"):
        if not line.startswith(b"data: "):
            continue
        event = orjson.loads(line[6:])
        if event.get("type") == "content_block_start":
            block = event["content_block"]
            if block["type"] == "tool_use":
                blocks[event["index"]] = {"id": block["id"], "name": block["name"], "json": ""}
        elif event.get("type") == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "input_json_delta":
                found = blocks[event["index"]]
                found["json"] = str(found["json"]) + delta["partial_json"]
    return blocks


async def test_interleaved_argument_deltas_stay_with_their_call(edge, client) -> None:
    fn = {"name": "read", "arguments": ""}
    edge.reply = sse_reply(
        sse(
            {**CHUNK, "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
            _call(0, id="call_a", type="function", function=fn),
            _call(1, id="call_b", type="function", function=fn),
            _args(0, '{"path": '),
            _args(1, '{"path": '),
            _args(0, '"a.py"}'),
            _args(1, '"b.py"}'),
            {**CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        )
    )
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    headers = {"x-api-key": KEY}
    r = await messages(client, upstream, orjson.dumps(BODY), headers, "", None)
    assert r.chunks is not None
    data = b"".join([c async for c in r.chunks])
    calls = {b["id"]: orjson.loads(str(b["json"])) for b in _blocks(data).values()}
    assert calls == {"call_a": {"path": "a.py"}, "call_b": {"path": "b.py"}}, data


async def test_calls_started_in_one_chunk_then_interleaved(edge, client) -> None:
    fn = {"name": "read", "arguments": ""}
    both = {
        **CHUNK,
        "choices": [
            {
                "index": 0,
                "delta": {
                    "role": "assistant",
                    "tool_calls": [
                        {"index": 0, "id": "call_a", "type": "function", "function": fn},
                        {"index": 1, "id": "call_b", "type": "function", "function": fn},
                    ],
                },
            }
        ],
    }
    edge.reply = sse_reply(
        sse(
            both,
            _args(1, '{"path": "b'),
            _args(0, '{"path": "a'),
            _args(1, '.py"}'),
            _args(0, '.py"}'),
            {**CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        )
    )
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    r = await messages(client, upstream, orjson.dumps(BODY), {"x-api-key": KEY}, "", None)
    assert r.chunks is not None
    data = b"".join([c async for c in r.chunks])
    blocks = _blocks(data)
    assert [b["id"] for _, b in sorted(blocks.items())] == ["call_a", "call_b"]
    calls = {b["id"]: orjson.loads(str(b["json"])) for b in blocks.values()}
    assert calls == {"call_a": {"path": "a.py"}, "call_b": {"path": "b.py"}}, data


async def test_a_calls_id_said_on_every_fragment_opens_one_block(edge, client) -> None:
    """Some servers write a call's id and name on each of its fragments: one call, one block
    (two blocks of one id, each with part of the arguments, before); a new id at the same index
    (a server that numbers no call) is another call."""
    fn = {"name": "read"}
    edge.reply = sse_reply(
        sse(
            {**CHUNK, "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
            _call(0, id="call_a", type="function", function={**fn, "arguments": '{"path": '}),
            _call(0, id="call_a", type="function", function={**fn, "arguments": '"a.py"}'}),
            _call(0, id="call_b", type="function", function={**fn, "arguments": '{"path": '}),
            _call(0, id="call_b", type="function", function={**fn, "arguments": '"b.py"}'}),
            {**CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        )
    )
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    r = await messages(client, upstream, orjson.dumps(BODY), {"x-api-key": KEY}, "", None)
    assert r.chunks is not None
    data = b"".join([c async for c in r.chunks])
    blocks = [b for _, b in sorted(_blocks(data).items())]
    assert [b["id"] for b in blocks] == ["call_a", "call_b"], data
    assert [orjson.loads(str(b["json"])) for b in blocks] == [{"path": "a.py"}, {"path": "b.py"}]
