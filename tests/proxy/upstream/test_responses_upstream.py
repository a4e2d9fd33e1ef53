"""The native Responses relay (``proxy.upstream.responses``): ``{base_url}/responses`` with the
body as sent, Codex's session headers passed on besides chat's, the key as for chat, and the SSE
relayed untouched with its usage read from ``response.completed`` (however large that event)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest

from proxy.settings import UpstreamSettings
from proxy.upstream.openai import UpstreamClient
from proxy.upstream.responses import responses
from proxy.upstream.sse_usage import MAX_PENDING, UsageTap
from proxy.upstream.usage import usage_fields
from tests.support.anthropic_upstream import response_events, response_object, sse_reply
from tests.support.edge_upstream import Reply

CODEX = {
    "authorization": "Bearer sk-client-0000000000",
    "originator": "codex_exec",
    "user-agent": "codex_exec/0.169.0 (Debian 12.0.0; x86_64) dumb (codex_exec; 0.169.0)",
    "session-id": "0199a000-0000-7000-8000-000000000001",
    "thread-id": "0199a000-0000-7000-8000-000000000001",
    "x-client-request-id": "0199a000-0000-7000-8000-000000000001",
    "x-codex-window-id": "0199a000:0",
    "x-codex-beta-features": "remote_compaction_v2",
    "x-codex-turn-metadata": '{"session_id":"0199a","request_kind":"turn"}',
    "version": "0.169.0",
    "openai-beta": "responses=experimental",
    "openai-organization": "org-client",
    "accept": "text/event-stream",
    "content-type": "application/json",
}
NOT_FORWARDED = {"cookie": "ctxproxy_ui=secret", "x-session-id": "s1", "x-other": "1"}
BODY = orjson.dumps(
    {
        "model": "gpt-5",
        "stream": True,
        "input": [{"type": "message", "role": "user", "content": "make a folder"}],
        "store": False,
        "prompt_cache_key": "0199a",
    }
)


@pytest.fixture
async def client() -> AsyncIterator[UpstreamClient]:
    c = UpstreamClient()
    yield c
    await c.aclose()


async def test_codex_headers_and_the_body_pass(edge, client) -> None:
    edge.reply = sse_reply(response_events())
    up = UpstreamSettings(name="openai", base_url=edge.base_url)
    r = await responses(client, up, BODY, {**CODEX, **NOT_FORWARDED}, "sk-client-0000000000")
    assert r.chunks is not None
    chunks = [c async for c in r.chunks]
    await r.close()
    seen = edge.last
    assert (seen.target, seen.body) == ("/v1/responses", BODY)
    for name, value in CODEX.items():
        if name not in ("accept", "content-type"):
            assert seen.header(name) == value, name
    assert not (seen.names & set(NOT_FORWARDED))
    assert seen.header("accept-encoding") == "identity"
    assert b"".join(chunks) == b"".join(response_events())


async def test_the_configured_key_replaces_the_clients(edge, client) -> None:
    edge.reply = Reply.json(response_object())
    up = UpstreamSettings(
        name="openai", base_url=edge.base_url, api_key_env="X_KEY", headers={"version": "cfg"}
    )
    r = await responses(client, up, BODY, CODEX, "sk-config-1111")
    assert orjson.loads(r.body or b"")["id"] == "resp_1"
    seen = edge.last
    assert seen.header("authorization") == "Bearer sk-config-1111"
    assert "openai-organization" not in seen.names  # the client's account, with our key: no
    assert seen.header("version") == "cfg"
    assert seen.header("session-id") == CODEX["session-id"]


def test_usage_of_a_completed_event_larger_than_the_cap_is_read() -> None:
    """``response.completed`` echoes the tools and instructions: often past 64 KiB."""
    tools = [{"type": "function", "name": f"t{i}", "description": "d" * 500} for i in range(300)]
    events = response_events(tools=tools, instructions="i" * 40_000)
    assert len(events[-1]) > 3 * MAX_PENDING
    data = b"".join(events)
    for size in (7, 1000, len(data)):
        tap = UsageTap()
        for i in range(0, len(data), size):
            tap.feed(data[i : i + size])
            assert tap.pending_bytes <= MAX_PENDING
        fields = usage_fields(tap.usage)
        assert (fields["prompt_tokens"], fields["completion_tokens"]) == (130, 7)
        assert fields["cached_tokens"] == 100
        assert tap.events == len(events)
