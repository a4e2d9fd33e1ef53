"""A client's request-context headers (``Idempotency-Key``, W3C trace context ``traceparent`` /
``tracestate``) reach a native upstream whatever the protocol: Chat Completions, Responses,
Messages and Gemini alike. None of them chooses an upstream, a URL or a credential."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.settings import UpstreamSettings
from proxy.upstream.anthropic import anthropic_headers
from proxy.upstream.gemini import gemini_headers
from proxy.upstream.openai import UpstreamClient
from proxy.upstream.responses import responses_headers
from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import EdgeUpstream
from tests.support.factories import request, user

CONTEXT = {
    "idempotency-key": "req-7f3a",
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "tracestate": "vendor=opaque",
}


# each relay's headers: (upstream kind, the function that builds them)
EVERY_RELAY = pytest.mark.parametrize(
    ("kind", "build"),
    [
        ("openai", lambda u, h, k: UpstreamClient()._headers(u, h, k)),
        ("openai", responses_headers),
        ("anthropic", anthropic_headers),
        ("gemini", gemini_headers),
    ],
    ids=["chat", "responses", "messages", "gemini"],
)


def upstream(kind: str) -> UpstreamSettings:
    return UpstreamSettings(name="u", kind=kind, match=["*"])


@EVERY_RELAY
def test_every_protocol_forwards_the_request_context(kind: str, build: object) -> None:
    headers = build(upstream(kind), CONTEXT, "k")  # type: ignore[operator]
    for name, value in CONTEXT.items():
        assert headers.get(name) == value, name


@EVERY_RELAY
def test_with_the_servers_key_no_idempotency_key_goes(kind: str, build: object) -> None:
    """Beside the one server key a tenant's idempotency key would meet another's at the
    provider (its request answered with the other's stored result, or refused as a replay):
    only the trace context goes."""
    shared = UpstreamSettings(name="u", kind=kind, match=["*"], api_key_env="SERVER_KEY")
    headers = build(shared, CONTEXT, "k")  # type: ignore[operator]
    assert "idempotency-key" not in headers
    assert headers["traceparent"] == CONTEXT["traceparent"]


async def test_a_chat_completion_carries_them_upstream(tmp_path: Path, edge: EdgeUpstream) -> None:
    settings = proxy_settings(edge.base_url)
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=request(user("hi")), headers=CONTEXT)
    assert r.status_code == 200, r.text
    for name, value in CONTEXT.items():
        assert edge.last.header(name) == value, name


def test_the_hops_own_headers_stay_on_this_hop() -> None:
    """``Proxy-Connection`` and the names ``Connection`` lists are this connection's, not the
    upstream's (RFC 9110, 7.6.1): a client's ``X-Hop-Secret`` named there stays here."""
    client = {
        "connection": "close, X-Hop-Secret",
        "x-hop-secret": "s3cret",
        "proxy-connection": "keep-alive",
        "anthropic-version": "2023-06-01",
    }
    headers = anthropic_headers(upstream("anthropic"), client, "k")
    assert "x-hop-secret" not in headers and "proxy-connection" not in headers
    assert headers["anthropic-version"] == "2023-06-01"


def test_a_non_ascii_value_goes_as_the_client_sent_it() -> None:
    """The server reads header bytes as Latin-1 and the upstream client sends text as UTF-8:
    a client's ``é`` arrived as ``Ã\\x83Â©``."""
    sent = "é-beta".encode().decode("latin-1")  # as the server hands it over
    headers = anthropic_headers(upstream("anthropic"), {"anthropic-beta": sent}, "k")
    assert headers["anthropic-beta"].encode() == "é-beta".encode()
    bad = b"\xff\xfe".decode("latin-1")
    assert "x-odd" not in anthropic_headers(upstream("anthropic"), {"x-odd": bad}, "k")


def test_with_the_servers_key_the_messages_relay_sends_only_the_apis_own_headers() -> None:
    """A gateway in front of Anthropic reads its own credential, config, cache key and routing
    headers: beside the gateway's key, a tenant's chose its account, target or a cache entry
    other tenants read (found relayed: cf-aig-authorization, cf-aig-cache-key, x-portkey-*,
    helicone-auth, x-litellm-api-key, anthropic-workspace-id, x-envoy-*, idempotency-key)."""
    served = UpstreamSettings(name="u", kind="anthropic", match=["*"], api_key_env="K")
    claude_code = {
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "interleaved-thinking-2025-05-14",
        "anthropic-dangerous-direct-browser-access": "true",
        "user-agent": "claude-cli/2.1.330 (external, cli)",
        "x-app": "cli",
        "x-claude-code-session-id": "5f1c",
        "x-stainless-retry-count": "0",
        **CONTEXT,
    }
    gateway = {
        "cf-aig-authorization": "Bearer other",
        "cf-aig-cache-key": "shared",
        "x-portkey-api-key": "pk",
        "x-portkey-config": '{"target": "x"}',
        "helicone-auth": "Bearer h",
        "x-litellm-api-key": "sk-l",
        "x-amz-security-token": "t",
        "anthropic-workspace-id": "wrk_other",
        "x-envoy-original-path": "/admin",
    }
    headers = anthropic_headers(served, {**claude_code, **gateway}, "server-key")
    assert headers["x-api-key"] == "server-key"
    assert not set(gateway) & set(headers)
    assert "idempotency-key" not in headers  # one tenant's would meet another's on one account
    kept = {k: v for k, v in claude_code.items() if k != "idempotency-key"}
    assert {k: headers.get(k) for k in kept} == kept
    # the client's own key: what it sends goes, as before
    own = anthropic_headers(upstream("anthropic"), {**claude_code, **gateway}, "client-key")
    assert own["cf-aig-cache-key"] == "shared"
