"""The native Anthropic relay (``proxy.upstream.anthropic``) against a socket-level upstream: the
body goes as sent and the query's ``beta`` alone, every client header but hop-by-hop ones, ours
and a gateway's forwarding and method-override ones passes (the whole
``anthropic-beta`` list, either auth style), a configured key replaces the client's, the SSE comes
back chunk by chunk byte for byte, and its usage is read."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest

from proxy.errors import UpstreamKeyMissing
from proxy.settings import UpstreamSettings
from proxy.upstream.anthropic import COUNT_TOKENS_PATH, messages
from proxy.upstream.openai import UpstreamClient
from proxy.upstream.sse_usage import UsageTap
from proxy.upstream.usage import usage_fields
from tests.support.anthropic_upstream import message_events, sse_reply
from tests.support.edge_upstream import Reply
from tests.support.factories import anthropic_message

BETA = (
    "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,"
    "effort-2025-11-24"
)
CLIENT = {
    "anthropic-version": "2023-06-01",
    "anthropic-beta": BETA,
    "x-api-key": "sk-ant-client-000000000000",
    "user-agent": "claude-cli/2.1.330 (external, sdk-cli)",
    "x-app": "cli",
    "x-claude-code-session-id": "692c0000-0000-4000-8000-000000000000",
    "anthropic-dangerous-direct-browser-access": "true",
    "x-stainless-retry-count": "0",
    "x-stainless-timeout": "600",
    "accept": "application/json",
    "content-type": "application/json",
    # never forwarded:
    "accept-encoding": "gzip, deflate, br, zstd",
    "host": "127.0.0.1:8787",
    "content-length": "999",
    "connection": "keep-alive",
    "te": "trailers",
    "x-session-id": "s1",
    "x-parent-session-id": "p1",
    "x-ctxproxy-debug": "1",
    "cookie": "ctxproxy_ui=secret",
}
BODY = orjson.dumps(
    {
        "model": "claude-opus-5-5",
        "max_tokens": 128000,
        "stream": True,
        "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.330.031;"}],
        "messages": [{"role": "user", "content": "make a folder"}],
        "metadata": {"user_id": '{"session_id":"692c"}'},
    }
)


@pytest.fixture
async def client() -> AsyncIterator[UpstreamClient]:
    c = UpstreamClient()
    yield c
    await c.aclose()


def upstream(base_url: str, **extra: object) -> UpstreamSettings:
    return UpstreamSettings(name="claude", kind="anthropic", base_url=base_url, **extra)


async def drain(response) -> list[bytes]:  # type: ignore[no-untyped-def]
    assert response.chunks is not None
    got = [chunk async for chunk in response.chunks]
    await response.close()
    return got


async def test_client_headers_query_and_body_pass_as_sent(edge, client) -> None:
    edge.reply = sse_reply(message_events())
    r = await messages(client, upstream(edge.url), BODY, CLIENT, "beta=true", None)
    assert r.status == 200
    await drain(r)
    seen = edge.last
    assert (seen.method, seen.target, seen.body) == ("POST", "/v1/messages?beta=true", BODY)
    for name in CLIENT:
        if name in ("host", "content-length", "accept-encoding", "connection", "te"):
            continue  # framing: ours
        if name.startswith("x-ctxproxy-") or name in (
            "x-session-id",
            "x-parent-session-id",
            "cookie",
        ):
            assert name not in seen.names
        else:
            assert seen.header(name) == CLIENT[name], name
    assert seen.header("anthropic-beta") == BETA  # the whole list, one header
    assert seen.header("accept-encoding") == "identity"
    assert seen.header("content-length") == str(len(BODY))
    assert seen.header("host") == edge.url.removeprefix("http://")
    assert "authorization" not in seen.names


async def test_a_bearer_token_passes_as_sent(edge, client) -> None:
    edge.reply = Reply.json(anthropic_message())
    headers = {"authorization": "Bearer tok-client-0000", "anthropic-version": "2023-06-01"}
    r = await messages(client, upstream(edge.url), BODY, headers, "", None)
    assert r.status == 200 and orjson.loads(r.body or b"") == anthropic_message()
    assert edge.last.header("authorization") == "Bearer tok-client-0000"
    assert "x-api-key" not in edge.last.names
    assert edge.last.target == "/v1/messages"


async def test_the_configured_key_replaces_the_clients(edge, client, monkeypatch) -> None:
    monkeypatch.setenv("CLAUDE_TEST_KEY", "sk-ant-config-1111")
    edge.reply = Reply.json(anthropic_message())
    up = upstream(edge.url, api_key_env="CLAUDE_TEST_KEY", headers={"anthropic-version": "x"})
    headers = {**CLIENT, "authorization": "Bearer tok-client"}
    await messages(client, up, BODY, headers, "beta=true", "sk-ant-config-1111")
    seen = edge.last
    assert seen.header("x-api-key") == "sk-ant-config-1111"
    assert "authorization" not in seen.names
    assert seen.header("anthropic-version") == "x"  # config's headers win
    assert seen.header("anthropic-beta") == BETA


async def test_no_credential_header_of_the_client_goes_with_the_configured_key(
    edge, client, monkeypatch
) -> None:
    """The proxy reads a client's key from any of these (in keys mode: its proxy key)."""
    monkeypatch.setenv("CLAUDE_TEST_KEY", "sk-ant-config-1111")
    edge.reply = Reply.json(anthropic_message())
    up = upstream(edge.url, api_key_env="CLAUDE_TEST_KEY")
    for name in ("api-key", "x-goog-api-key", "x-api-key", "authorization"):
        headers = {**CLIENT, name: "proxy-key-of-a-client"}
        await messages(client, up, BODY, headers, "", "sk-ant-config-1111")
        assert edge.last.header("x-api-key") == "sk-ant-config-1111"
        assert b"proxy-key-of-a-client" not in repr(edge.last.headers).encode(), name


async def test_the_clients_account_headers_go_only_with_its_own_key(
    edge, client, monkeypatch
) -> None:
    """With the server's key, a header choosing the account billed (Google's user project in
    front of Claude on Vertex, an organization) is the client's say over the gateway's key."""
    monkeypatch.setenv("CLAUDE_TEST_KEY", "sk-ant-config-1111")
    edge.reply = Reply.json(anthropic_message())
    account = {"x-goog-user-project": "tenant-billing", "anthropic-organization-id": "org-x"}
    await messages(client, upstream(edge.url, api_key_env="CLAUDE_TEST_KEY"), BODY,
                   {**CLIENT, **account}, "", "sk-ant-config-1111")  # fmt: skip
    assert not {"x-goog-user-project", "anthropic-organization-id"} & edge.last.names
    await messages(client, upstream(edge.url), BODY, {**CLIENT, **account}, "", None)
    assert edge.last.header("x-goog-user-project") == "tenant-billing"  # its own key: its say


async def test_an_empty_key_variable_sends_nothing(edge, client, monkeypatch) -> None:
    monkeypatch.delenv("CLAUDE_TEST_KEY", raising=False)
    up = upstream(edge.url, api_key_env="CLAUDE_TEST_KEY")
    with pytest.raises(UpstreamKeyMissing):
        await messages(client, up, BODY, CLIENT, "", None)
    assert edge.seen == []


async def test_count_tokens_goes_to_its_path(edge, client) -> None:
    edge.reply = Reply.json({"input_tokens": 42})
    r = await messages(
        client, upstream(edge.url), b'{"model":"c"}', CLIENT, "beta=true", None, COUNT_TOKENS_PATH
    )
    assert orjson.loads(r.body or b"") == {"input_tokens": 42}
    assert edge.last.target == "/v1/messages/count_tokens?beta=true"


async def test_the_query_keeps_beta_alone(edge, client) -> None:
    """A parameter is the upstream's to read: a client's others could steer a gateway there."""
    edge.reply = Reply.json(anthropic_message())
    odd = "beta=true&x=a b%2Fc&target=https://evil.example&key=x"
    await messages(client, upstream(edge.url), BODY, {}, odd, None)
    assert edge.last.target == "/v1/messages?beta=true"
    await messages(client, upstream(edge.url), BODY, {}, "api-version=2099", None)
    assert edge.last.target == "/v1/messages"


async def test_forwarding_and_method_override_headers_stay_here(edge, client) -> None:
    edge.reply = Reply.json(anthropic_message())
    steering = {"x-forwarded-for": "10.0.0.9", "x-forwarded-host": "admin.internal",
                "forwarded": "for=10.0.0.9", "x-real-ip": "10.0.0.9",
                "x-http-method-override": "DELETE", "x-original-url": "/admin"}  # fmt: skip
    await messages(client, upstream(edge.url), BODY, {**CLIENT, **steering}, "", None)
    assert not set(steering) & set(edge.last.names)
    assert edge.last.header("anthropic-beta") == BETA


async def test_the_stream_comes_back_chunk_by_chunk_untouched(edge, client) -> None:
    events = message_events()
    edge.reply = sse_reply(events, request_id="req_1", anthropic_ratelimit_requests_remaining="9")
    edge.reply.after_first_chunk = None
    r = await messages(client, upstream(edge.url), BODY, CLIENT, "beta=true", None)
    assert r.headers["content-type"] == "text/event-stream"
    assert r.headers["request-id"] == "req_1"
    assert r.headers["anthropic-ratelimit-requests-remaining"] == "9"
    chunks = await drain(r)
    assert b"".join(chunks) == b"".join(events)
    tap = UsageTap()
    for chunk in chunks:
        tap.feed(chunk)
    fields = usage_fields(tap.usage)
    assert (fields["prompt_tokens"], fields["completion_tokens"], fields["cached_tokens"]) == (
        130,
        7,
        100,
    )


async def test_the_first_event_arrives_before_the_rest(edge, client) -> None:
    events = message_events()
    edge.reply = sse_reply(events)
    edge.reply.after_first_chunk = "stall"
    r = await messages(client, upstream(edge.url), BODY, CLIENT, "", None)
    assert r.chunks is not None
    first = await asyncio.wait_for(anext(aiter(r.chunks)), 5)
    assert first == events[0]  # relayed on its own, not held for the rest
    await r.close()


async def test_an_error_status_comes_back_as_the_upstream_wrote_it(edge, client) -> None:
    err = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    edge.reply = Reply.json(err, 529, retry_after="3", x_should_retry="true", set_cookie="a=b")
    r = await messages(client, upstream(edge.url), BODY, CLIENT, "", None)
    assert r.status == 529 and orjson.loads(r.body or b"") == err
    assert r.headers["retry-after"] == "3"
    assert "set-cookie" not in r.headers
    assert r.headers["x-should-retry"] == "true"  # the SDKs obey it over their own rule


def test_the_default_base_url_has_no_v1(client) -> None:
    up = UpstreamSettings(name="claude", kind="anthropic")
    url = client._target(up).url("/v1/messages", "beta=true")
    assert str(url) == "https://api.anthropic.com/v1/messages?beta=true"
