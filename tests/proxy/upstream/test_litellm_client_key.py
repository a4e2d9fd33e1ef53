"""litellm falls back on keys in the process environment (``ANTHROPIC_API_KEY`` …) when it is given
none. A litellm upstream without ``api_key_env`` therefore uses the client's own key only: a client
that sends none gets 401 and nothing is sent, rather than spending the key the proxy's environment
holds. With ``api_key_env`` set but empty, nothing is sent either.

The upstream is a loopback server answering as Anthropic's Messages API (``ANTHROPIC_API_BASE``
points litellm at it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message, request, user

MODEL = "anthropic/claude-3-5-sonnet-20241022"
ENV_KEY = "sk-ant-proxy-environment-000000"
CLIENT_KEY = "sk-ant-client-own-key-1111111"
ANTHROPIC_REPLY = anthropic_message("hello", model="claude-3-5-sonnet-20241022")


@pytest.fixture
def real(monkeypatch: pytest.MonkeyPatch) -> Iterator[EdgeUpstream]:
    server = EdgeUpstream().start()
    server.reply = Reply.json(ANTHROPIC_REPLY)
    monkeypatch.setenv("ANTHROPIC_API_BASE", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)  # the proxy's own, never a client's
    yield server
    server.stop()


def _settings(**extra: Any) -> Any:
    spec = {"name": "claude", "match": ["anthropic/*"], "kind": "litellm", **extra}
    return proxy_settings("http://unused.test/v1", upstreams=[spec])


@pytest.mark.parametrize("authorization", [None, "Bearer ", "Basic abc", "Bearer    "])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_keyless_client_gets_401_not_the_environment_key(
    tmp_path: Path, real: EdgeUpstream, authorization: str | None, stream: bool
) -> None:
    headers = {"authorization": authorization} if authorization is not None else {}
    body = request(user("hi"), model=MODEL, max_tokens=50, stream=stream)
    async with in_process(_settings(), str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=body, headers=headers)
        rows = await log_rows(client)
    assert r.status_code == 401, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
    assert "no API key" in error["message"] and "api_key_env" in error["message"]
    assert real.connections == 0
    assert rows[0]["status"] == 401


async def test_the_clients_own_key_goes_upstream(tmp_path: Path, real: EdgeUpstream) -> None:
    body = request(user("hi"), model=MODEL, max_tokens=50)
    async with in_process(_settings(), str(tmp_path / "db")) as client:
        r = await client.post(
            "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {CLIENT_KEY}"}
        )
    assert r.status_code == 200, r.text
    (seen,) = real.seen
    assert seen.header("x-api-key") == CLIENT_KEY


async def test_an_empty_key_variable_sends_nothing(
    tmp_path: Path, real: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``api_key_env`` names the key to use: when it is empty, litellm must not pick another."""
    monkeypatch.setenv("CLAUDE_KEY_FOR_TEST", "  \n")
    body = request(user("hi"), model=MODEL, max_tokens=50)
    async with in_process(_settings(api_key_env="CLAUDE_KEY_FOR_TEST"), str(tmp_path / "d")) as c:
        r = await c.post(
            "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {CLIENT_KEY}"}
        )
    assert r.status_code == 500, r.text
    error = r.json()["error"]
    assert error["code"] == "upstream_key_missing" and "CLAUDE_KEY_FOR_TEST" not in error["message"]
    assert real.connections == 0
