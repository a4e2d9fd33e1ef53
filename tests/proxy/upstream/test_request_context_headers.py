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


def upstream(kind: str) -> UpstreamSettings:
    return UpstreamSettings(name="u", kind=kind, match=["*"])


@pytest.mark.parametrize(
    ("kind", "build"),
    [
        ("openai", lambda u, h, k: UpstreamClient()._headers(u, h, k)),
        ("openai", responses_headers),
        ("anthropic", anthropic_headers),
        ("gemini", gemini_headers),
    ],
    ids=["chat", "responses", "messages", "gemini"],
)
def test_every_protocol_forwards_the_request_context(kind: str, build: object) -> None:
    headers = build(upstream(kind), CONTEXT, "k")  # type: ignore[operator]
    for name, value in CONTEXT.items():
        assert headers.get(name) == value, name


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
