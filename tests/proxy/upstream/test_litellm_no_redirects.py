"""An upstream's redirect is never followed on the litellm paths, as the native relays follow
none: litellm's HTTP clients followed it, sending the server's ``x-api-key`` (and, on a 307 or
308, the request's body) to whatever host the ``Location`` named. The client is told the
upstream answered a redirect (502, in its protocol's shape), and the other host sees nothing;
with litellm's production transport (aiohttp) and its httpx one alike."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply

SERVER_KEY = "sk-ant-server-own-key-0123456789"
ASK = [{"role": "user", "content": "hi"}]


@pytest.fixture
def elsewhere() -> Iterator[EdgeUpstream]:
    """The host a redirect names."""
    server = EdgeUpstream().start()
    server.reply = Reply.json({"error": "must not be reached"})
    yield server
    server.stop()


@pytest.fixture
def fresh_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm's clients are made anew for each test (its transport as the test sets it)."""
    from proxy.providers import load_litellm

    litellm = load_litellm()
    from litellm.caching.llm_caching_handler import LLMClientCache
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    monkeypatch.setattr(litellm, "in_memory_llm_clients_cache", LLMClientCache())
    monkeypatch.setattr(litellm, "module_level_aclient", AsyncHTTPHandler(), raising=False)


# (path, body, the upstream as configured: its kind, and the base_url's suffix)
PATHS: dict[str, tuple[str, dict[str, Any], str, str]] = {
    "chat to anthropic": ("/v1/chat/completions", {"model": "claude-x", "messages": ASK},
                          "anthropic", ""),
    "messages to openai": ("/v1/messages", {"model": "gpt-4o", "max_tokens": 9, "messages": ASK},
                           "openai", "/v1"),
    "responses to anthropic": ("/v1/responses", {"model": "claude-x", "input": "hi"},
                               "anthropic", ""),
}  # fmt: skip


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
@pytest.mark.parametrize("code", [301, 302, 307, 308])
@pytest.mark.parametrize("path", PATHS)
async def test_a_redirect_is_told_not_followed(
    tmp_path: Path,
    edge: EdgeUpstream,
    elsewhere: EdgeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    fresh_clients: None,
    transport: str,
    code: int,
    path: str,
) -> None:
    if transport == "httpx":
        monkeypatch.setenv("DISABLE_AIOHTTP_TRANSPORT", "True")
    else:
        monkeypatch.delenv("DISABLE_AIOHTTP_TRANSPORT", raising=False)
    monkeypatch.setenv("SERVER_KEY_FOR_TEST", SERVER_KEY)
    route, body, kind, suffix = PATHS[path]
    edge.reply = Reply(code, [("location", elsewhere.url + "/v1/messages")], b"")
    upstream = {"name": "up", "kind": kind, "match": ["*"], "base_url": edge.url + suffix}
    upstream["api_key_env"] = "SERVER_KEY_FOR_TEST"
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(route, json=body)
    assert edge.seen, "the upstream was called"
    assert elsewhere.connections == 0  # nothing went where the redirect said
    assert r.status_code == 502, r.text
    assert f"Upstream up answered HTTP {code}, which is not relayed." in r.text
    assert SERVER_KEY not in r.text
