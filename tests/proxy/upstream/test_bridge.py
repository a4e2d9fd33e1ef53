"""Cross-protocol requests through litellm (``proxy.upstream.bridge``), against scripted upstreams
on loopback: Anthropic Messages to an OpenAI chat upstream, Responses and chat completions to an
Anthropic upstream; answers in the client's protocol, errors relayed with the provider's status."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import orjson
import pytest

from proxy.errors import BadRequest, Unauthorized, UpstreamFailed
from proxy.settings import UpstreamSettings
from proxy.upstream.anthropic import COUNT_TOKENS_PATH, messages
from proxy.upstream.openai import UpstreamClient
from proxy.upstream.responses import responses
from proxy.upstream.sse_usage import UsageTap
from proxy.upstream.usage import usage_fields
from tests.support.anthropic_upstream import message_events, sse_reply
from tests.support.edge_upstream import Reply, sse
from tests.support.factories import anthropic_message, chat_completion

# litellm must use httpx (as the other litellm tests have it); set before it is imported.
os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"

# litellm's stream handler reads a pydantic attribute deprecated in 2.11 (a warning, not an
# error, outside the tests)
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

KEY = "sk-test-bridge-000000000"
CLAUDE_BODY = {
    "model": "gpt-4o",
    "max_tokens": 100,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    "metadata": {"user_id": "u"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
}
CLAUDE_HEADERS = {"x-api-key": KEY, "anthropic-beta": "claude-code-20250219"}
CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o"}


@pytest.fixture
async def client() -> AsyncIterator[UpstreamClient]:
    c = UpstreamClient()
    yield c
    await c.aclose()


def openai_upstream(edge) -> UpstreamSettings:  # type: ignore[no-untyped-def]
    return UpstreamSettings(name="oai", base_url=edge.base_url)


def anthropic_upstream(edge) -> UpstreamSettings:  # type: ignore[no-untyped-def]
    return UpstreamSettings(name="claude", kind="anthropic", base_url=edge.url)


async def test_messages_to_an_openai_upstream(edge, client) -> None:
    edge.reply = Reply.json(chat_completion("Bonjour"))
    body = orjson.dumps(CLAUDE_BODY)
    r = await messages(client, openai_upstream(edge), body, CLAUDE_HEADERS, "beta=true", None)
    assert r.status == 200, r.body
    answer = orjson.loads(r.body or b"")
    assert answer["type"] == "message" and answer["content"][0]["text"] == "Bonjour"
    assert usage_fields(answer["usage"])["prompt_tokens"] == 3
    seen = edge.last
    assert seen.target == "/v1/chat/completions"
    assert seen.header("authorization") == f"Bearer {KEY}"  # the client's x-api-key
    assert "anthropic-beta" not in seen.names
    sent = seen.json()
    assert sent["messages"][0]["role"] == "system"
    assert "Be brief." in orjson.dumps(sent["messages"][0]).decode()
    assert "metadata" not in sent and "context_management" not in sent


async def test_messages_stream_to_an_openai_upstream(edge, client) -> None:
    edge.reply = sse_reply(
        sse(
            {**CHUNK, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]},
            {
                **CHUNK,
                "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}],
            },
            {
                **CHUNK,
                "choices": [],
                "usage": {
                    "prompt_tokens": 9,
                    "completion_tokens": 2,
                    "prompt_tokens_details": {"cached_tokens": 4},
                },
            },
        )
    )
    body = orjson.dumps({**CLAUDE_BODY, "stream": True})
    r = await messages(client, openai_upstream(edge), body, CLAUDE_HEADERS, "", None)
    assert r.chunks is not None and r.headers["content-type"] == "text/event-stream"
    data = b"".join([c async for c in r.chunks])
    assert data.startswith(b"event: message_start\n")
    assert b'"text_delta"' in data and data.rstrip().endswith(b'{"type": "message_stop"}')
    tap = UsageTap()
    tap.feed(data)
    fields = usage_fields(tap.usage)
    assert (fields["prompt_tokens"], fields["completion_tokens"], fields["cached_tokens"]) == (
        9,
        2,
        4,
    )
    assert edge.last.json()["stream"] is True


async def test_a_provider_error_keeps_its_status(edge, client) -> None:
    err = {"error": {"message": "model gpt-4o is overloaded", "type": "server_error"}}
    edge.reply = Reply.json(err, 400)
    r = await messages(
        client, openai_upstream(edge), orjson.dumps(CLAUDE_BODY), CLAUDE_HEADERS, "", None
    )
    assert r.status == 400
    error = r.extra["error"]
    assert isinstance(error, UpstreamFailed) and "overloaded" in error.message
    assert orjson.loads(r.body or b"")["error"]["message"] == error.message


async def test_no_key_no_call(edge, client) -> None:
    with pytest.raises(Unauthorized):
        await messages(client, openai_upstream(edge), orjson.dumps(CLAUDE_BODY), {}, "", None)
    assert edge.seen == []


async def test_count_tokens_is_estimated_here(edge, client) -> None:
    body = orjson.dumps(CLAUDE_BODY)
    r = await messages(client, openai_upstream(edge), body, {}, "", None, COUNT_TOKENS_PATH)
    assert orjson.loads(r.body or b"")["input_tokens"] > 5
    assert edge.seen == []


RESPONSES_BODY = {
    "model": "claude-sonnet-4-5",
    "instructions": "Be brief.",
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    ],
    "store": False,
    "metadata": {"a": "b"},
}


async def test_responses_to_an_anthropic_upstream(edge, client) -> None:
    usage = {"input_tokens": 3, "output_tokens": 1, "cache_read_input_tokens": 7}
    edge.reply = Reply.json(anthropic_message("hi there", usage=usage))
    r = await responses(client, anthropic_upstream(edge), orjson.dumps(RESPONSES_BODY), {}, KEY)
    assert r.status == 200, r.body
    answer = orjson.loads(r.body or b"")
    assert answer["object"] == "response"
    assert answer["output"][0]["content"][0]["text"] == "hi there"
    fields = usage_fields(answer["usage"])
    assert (fields["prompt_tokens"], fields["cached_tokens"]) == (10, 7)
    seen = edge.last
    assert (seen.target, seen.header("x-api-key")) == ("/v1/messages", KEY)
    assert seen.json()["system"] == [{"type": "text", "text": "Be brief."}]
    assert "metadata" not in seen.json()


async def test_responses_stream_to_an_anthropic_upstream(edge, client) -> None:
    edge.reply = sse_reply(message_events("Hello there"))
    body = orjson.dumps({**RESPONSES_BODY, "stream": True})
    r = await responses(client, anthropic_upstream(edge), body, {}, KEY)
    assert r.chunks is not None
    data = b"".join([c async for c in r.chunks])
    assert data.startswith(b"event: response.created\ndata: ")
    assert b"event: response.output_text.delta\n" in data
    assert b"event: response.completed\n" in data
    tap = UsageTap()
    tap.feed(data)
    assert usage_fields(tap.usage)["prompt_tokens"] == 130


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"previous_response_id": "resp_0"}, "previous_response_id"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"conversation": {"id": "conv_1"}}, "conversation"),
        ({"input": [{"type": "item_reference", "id": "fc_1"}]}, "item_reference"),
    ],
)
async def test_history_only_openai_keeps_is_refused(edge, client, extra, named) -> None:  # type: ignore[no-untyped-def]
    """litellm keeps no responses: a body standing on stored ones is refused, not sent without
    them (an output of a stored call would reach the provider with no call)."""
    body = orjson.dumps({**RESPONSES_BODY, **extra})
    with pytest.raises(BadRequest, match=named):
        await responses(client, anthropic_upstream(edge), body, {}, KEY)
    assert edge.seen == []


async def test_chat_completions_to_an_anthropic_upstream(edge, client) -> None:
    edge.reply = Reply.json(anthropic_message("Bonjour"))
    body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}
    r = await client.chat(anthropic_upstream(edge), body, {}, KEY)
    assert r.status == 200
    assert orjson.loads(r.body or b"")["choices"][0]["message"]["content"] == "Bonjour"
    assert (edge.last.target, edge.last.header("x-api-key")) == ("/v1/messages", KEY)


@pytest.mark.parametrize("model", ["qwen2.5-coder:7b", "gpt-5"])
async def test_thinking_to_a_server_not_openais_goes_to_chat(edge, client, model) -> None:  # type: ignore[no-untyped-def]
    """Claude Code with thinking on, through a ``kind: openai`` upstream that is a local server
    (Ollama, vLLM): litellm sent it to ``/responses``, which such a server lacks (a 404 on every
    request). It goes to chat, the budget as the effort it buckets to."""
    edge.reply = Reply.json(chat_completion("Bonjour"))
    thinking = {"type": "enabled", "budget_tokens": 1024}
    body = orjson.dumps({**CLAUDE_BODY, "model": model, "max_tokens": 2048, "thinking": thinking})
    r = await messages(client, openai_upstream(edge), body, CLAUDE_HEADERS, "", None)
    assert r.status == 200, r.body
    assert edge.last.target == "/v1/chat/completions"
    sent = edge.last.json()
    assert sent["reasoning_effort"] == "low" and "thinking" not in sent


def test_thinking_to_openais_own_api_is_left_to_litellm() -> None:
    """OpenAI's own API has ``/responses``, where the reasoning's summary comes back."""
    from proxy.upstream.bridge import _chat_only_thinking

    kwargs = {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 9}
    assert _chat_only_thinking(kwargs, "o3", "openai", "https://api.openai.com/v1") is kwargs
    assert _chat_only_thinking(kwargs, "o3", "openai", None) is kwargs
    adaptive = {"thinking": {"type": "adaptive"}}
    assert _chat_only_thinking(adaptive, "m", "openai", "http://127.0.0.1:11434/v1") is adaptive
