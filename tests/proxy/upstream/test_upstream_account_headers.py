"""Headers that pick which organization or project a key bills (``OpenAI-Organization``,
``OpenAI-Project``) are the client's to send only with the client's own key. With the upstream's
server-side key (``api_key_env``, in either auth mode) they are dropped, and config may set them
(``upstreams[].headers``). Seen from a socket-level loopback upstream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import request, user

SERVER_KEY = "sk-server-side-key-0123456789"
CLIENT_KEY = "sk-client-own-key-9876543210"
CLIENT_HEADERS = {
    "OpenAI-Organization": "org-client",
    "openai-project": "proj-client",
    "OpenAI-Beta": "assistants=v2",
}


def _settings(base_url: str, mode: str, **extra: Any) -> Any:
    spec = {"name": "u", "match": ["*"], "base_url": base_url, **extra}
    return proxy_settings(base_url, auth={"mode": mode}, upstreams=[spec])


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UPSTREAM_SERVER_KEY", SERVER_KEY)
    monkeypatch.setenv("CTXPROXY_KEYS", CLIENT_KEY)  # keys mode: the client's bearer


@pytest.mark.parametrize("mode", ["passthrough", "keys"])
async def test_a_server_key_drops_the_clients_account_headers(
    tmp_path: Path, edge: EdgeUpstream, keys: None, mode: str
) -> None:
    settings = _settings(edge.base_url, mode, api_key_env="UPSTREAM_SERVER_KEY")
    headers = {**CLIENT_HEADERS, "authorization": f"Bearer {CLIENT_KEY}"}
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=request(user("hi")), headers=headers)
    assert r.status_code == 200, r.text
    seen = edge.last
    assert seen.header("authorization") == f"Bearer {SERVER_KEY}"
    assert seen.header("openai-organization") is None and seen.header("openai-project") is None
    assert seen.header("openai-beta") == "assistants=v2"  # a feature switch, not an account


async def test_the_clients_own_key_keeps_its_account_headers(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    headers = {**CLIENT_HEADERS, "authorization": f"Bearer {CLIENT_KEY}"}
    async with in_process(_settings(edge.base_url, "passthrough"), str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json=request(user("hi")), headers=headers)
    assert r.status_code == 200, r.text
    seen = edge.last
    assert seen.header("authorization") == f"Bearer {CLIENT_KEY}"
    assert seen.header("openai-organization") == "org-client"
    assert seen.header("openai-project") == "proj-client"


@pytest.mark.parametrize("mode", ["passthrough", "keys"])
async def test_config_sets_the_account_headers(
    tmp_path: Path, edge: EdgeUpstream, keys: None, mode: str
) -> None:
    settings = _settings(
        edge.base_url,
        mode,
        api_key_env="UPSTREAM_SERVER_KEY",
        headers={"OpenAI-Organization": "org-config"},
    )
    headers = {**CLIENT_HEADERS, "authorization": f"Bearer {CLIENT_KEY}"}
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=request(user("hi")), headers=headers)
        assert r.status_code == 200, r.text
        chat = edge.last
        edge.reply = Reply.json({"object": "list", "data": []})
        models = await client.get("/v1/models", headers=headers)
        assert models.status_code == 200, models.text
    for seen in (chat, edge.last):
        assert seen.header("openai-organization") == "org-config"
        assert seen.header("openai-project") is None
        assert seen.header("authorization") == f"Bearer {SERVER_KEY}"
    assert edge.last.target == "/v1/models"


async def test_config_headers_win_over_the_clients_own(tmp_path: Path, edge: EdgeUpstream) -> None:
    settings = _settings(edge.base_url, "passthrough", headers={"openai-project": "proj-config"})
    headers = {**CLIENT_HEADERS, "authorization": f"Bearer {CLIENT_KEY}"}
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=request(user("hi")), headers=headers)
    assert r.status_code == 200, r.text
    assert edge.last.header("openai-project") == "proj-config"
    assert edge.last.header("openai-organization") == "org-client"


async def test_config_headers_reach_a_litellm_upstream(
    tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPSTREAM_SERVER_KEY", SERVER_KEY)
    edge.reply = Reply.json(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [{"type": "text", "text": "hi"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    spec = {
        "name": "claude",
        "match": ["anthropic/*"],
        "kind": "litellm",
        "base_url": edge.url,
        "api_key_env": "UPSTREAM_SERVER_KEY",
        "headers": {"X-Team": "blue"},
    }
    settings = proxy_settings(edge.base_url, upstreams=[spec])
    async with in_process(settings, str(tmp_path / "db")) as client:
        body = request(user("hi"), model="anthropic/claude-x", max_tokens=5)
        r = await client.post("/v1/chat/completions", json=body, headers=CLIENT_HEADERS)
    assert r.status_code == 200, r.text
    seen = edge.last
    assert seen.header("x-team") == "blue" and seen.header("x-api-key") == SERVER_KEY
    assert seen.header("openai-organization") is None
