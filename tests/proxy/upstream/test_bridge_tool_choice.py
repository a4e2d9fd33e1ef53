"""A Messages client's ``tool_choice.disable_parallel_tool_use`` reaches a provider behind
litellm's chat translation as ``parallel_tool_calls: false`` (``bridge_tool_choice``), JSON and
streamed; litellm dropped it, and OpenAI answered with several calls an agent wanted one at a
time. Anthropic itself gets the Messages body's own flag, nothing added."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from proxy.settings import UpstreamSettings
from proxy.upstream.anthropic import messages
from proxy.upstream.openai import UpstreamClient
from tests.support.anthropic_upstream import sse_reply
from tests.support.edge_upstream import Reply, sse
from tests.support.factories import anthropic_message, chat_completion

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"  # litellm on httpx, as the other bridge tests
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

KEY = "sk-test-bridge-000000000"
HEADERS = {"x-api-key": KEY}
TOOL = {"name": "bash", "description": "run", "input_schema": {"type": "object"}}
CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o"}


def _body(choice: dict[str, Any], **extra: Any) -> bytes:
    return orjson.dumps(
        {
            "model": "gpt-4o",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "run ls, then pwd"}],
            "tools": [TOOL],
            "tool_choice": choice,
            **extra,
        }
    )


@pytest.fixture
async def client() -> AsyncIterator[UpstreamClient]:
    c = UpstreamClient()
    yield c
    await c.aclose()


@pytest.mark.parametrize("kind", ["auto", "any"])
async def test_one_call_at_a_time_reaches_openai(
    edge: Any, client: UpstreamClient, kind: str
) -> None:
    edge.reply = Reply.json(chat_completion("ok"))
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    choice = {"type": kind, "disable_parallel_tool_use": True}
    r = await messages(client, upstream, _body(choice), HEADERS, "", None)
    assert r.status == 200, r.body
    assert edge.last.json()["parallel_tool_calls"] is False


async def test_one_call_at_a_time_reaches_openai_streamed(
    edge: Any, client: UpstreamClient
) -> None:
    edge.reply = sse_reply(
        sse(
            {**CHUNK, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}}]},
            {**CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        )
    )
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    body = _body({"type": "auto", "disable_parallel_tool_use": True}, stream=True)
    r = await messages(client, upstream, body, HEADERS, "", None)
    assert r.chunks is not None
    b"".join([c async for c in r.chunks])
    assert edge.last.json()["parallel_tool_calls"] is False


async def test_nothing_is_added_unasked_or_for_anthropic(edge: Any, client: UpstreamClient) -> None:
    edge.reply = Reply.json(chat_completion("ok"))
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    r = await messages(client, upstream, _body({"type": "auto"}), HEADERS, "", None)
    assert r.status == 200, r.body
    assert "parallel_tool_calls" not in edge.last.json()
    edge.reply = Reply.json(anthropic_message("ok", model="claude-sonnet-4-5"))
    claude = UpstreamSettings(name="c", kind="litellm", provider="anthropic", base_url=edge.url)
    body = orjson.loads(_body({"type": "auto", "disable_parallel_tool_use": True}))
    body["model"] = "claude-sonnet-4-5"
    r = await messages(client, claude, orjson.dumps(body), HEADERS, "", None)
    assert r.status == 200, r.body
    sent = edge.last.json()
    assert "parallel_tool_calls" not in sent
    assert sent["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
