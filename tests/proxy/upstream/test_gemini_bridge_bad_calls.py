"""A Gemini client bridged to another provider, whose model writes a call it cannot be given:
arguments that are not JSON, or JSON that is not an object. litellm's adapter made the first
``args: {}`` in a whole answer (the tool run with no arguments) and dropped it from a stream (a
``STOP`` with no call: the agent took the empty answer for its last word), and passed ``[1, 2]``
on as the call's args. Each now ends as Gemini ends such an answer itself:
``MALFORMED_FUNCTION_CALL``, the call left out."""

from __future__ import annotations

import os
from typing import Any

import orjson
import pytest

from proxy.settings import UpstreamSettings
from proxy.upstream.gemini import generate
from proxy.upstream.openai import UpstreamClient
from tests.support.anthropic_upstream import sse_reply
from tests.support.edge_upstream import Reply, sse
from tests.support.factories import chat_completion
from tests.support.gemini_bridge import client as client  # the fixture
from tests.support.gemini_bridge import route as route_of

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"  # litellm on httpx, as the other bridge tests
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

KEY = "sk-ant-dummy-bridge-key-00000000000000000000"
CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o"}
ASK = orjson.dumps({"contents": [{"role": "user", "parts": [{"text": "read a.py"}]}]})
BAD = ['{"path": "a.py"', "[1, 2]", '"a.py"', "not json"]


def _answer(arguments: str) -> dict[str, Any]:
    answer = chat_completion("")
    answer["choices"][0]["message"] = {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "call_Aa1", "type": "function",
                        "function": {"name": "read_file", "arguments": arguments}}],
    }  # fmt: skip
    answer["choices"][0]["finish_reason"] = "tool_calls"
    return answer


def _stream(arguments: str) -> Any:
    def delta(**d: Any) -> dict[str, Any]:
        return {**CHUNK, "choices": [{"index": 0, "delta": d}]}

    call = {"index": 0, "id": "call_Aa1", "type": "function",
            "function": {"name": "read_file", "arguments": ""}}  # fmt: skip
    return sse_reply(
        sse(
            delta(role="assistant", content=None, tool_calls=[call]),
            delta(tool_calls=[{"index": 0, "function": {"arguments": arguments}}]),
            {**CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {**CHUNK, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}},
        )
    )


def _calls(candidates: list[dict[str, Any]]) -> list[Any]:
    return [p["functionCall"] for c in candidates
            for p in c.get("content", {}).get("parts", []) if "functionCall" in p]  # fmt: skip


@pytest.mark.parametrize("arguments", BAD)
async def test_an_unreadable_call_in_an_answer_ends_it_malformed(
    edge: Any, client: UpstreamClient, arguments: str
) -> None:
    edge.reply = Reply.json(_answer(arguments))
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    r = await generate(client, upstream, route_of("gpt-4o"), ASK, {}, "", KEY)
    assert r.status == 200, r.body
    candidates = orjson.loads(r.body or b"")["candidates"]
    assert _calls(candidates) == []
    assert candidates[0]["finishReason"] == "MALFORMED_FUNCTION_CALL"


@pytest.mark.parametrize("arguments", BAD)
async def test_an_unreadable_call_in_a_stream_ends_it_malformed(
    edge: Any, client: UpstreamClient, arguments: str
) -> None:
    edge.reply = _stream(arguments)
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    route = route_of("gpt-4o", "streamGenerateContent")
    r = await generate(client, upstream, route, ASK, {}, "alt=sse", KEY)
    assert r.chunks is not None
    data = b"".join([c async for c in r.chunks])
    events = [orjson.loads(line[5:]) for line in data.split(b"\n") if line.startswith(b"data:")]
    candidates = [c for e in events for c in e.get("candidates", [])]
    assert _calls(candidates) == []
    finishes = [c["finishReason"] for c in candidates if c.get("finishReason")]
    assert finishes == ["MALFORMED_FUNCTION_CALL"]
    assert events[-1]["usageMetadata"]["promptTokenCount"] == 9


async def test_a_good_call_still_passes(edge: Any, client: UpstreamClient) -> None:
    edge.reply = Reply.json(_answer('{"path": "a.py"}'))
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    r = await generate(client, upstream, route_of("gpt-4o"), ASK, {}, "", KEY)
    candidates = orjson.loads(r.body or b"")["candidates"]
    assert _calls(candidates) == [{"name": "read_file", "args": {"path": "a.py"}, "id": "call_Aa1"}]
    assert candidates[0]["finishReason"] == "STOP"
