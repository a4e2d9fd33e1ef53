"""An upstream whose key variable (``api_key_env``) is unset or empty refuses each of its requests
with a 500 ``upstream_key_missing`` in the client's protocol, before anything is sent, on every
kind of upstream and every protocol: sent without a key, the provider's 401 would read as the
client's own key refused, and litellm would find another key in the environment. The variable's
name goes to the server log only. The start-up warning says the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proxy.settings import settings_from_mapping
from proxy.startup import unset_key_variables
from tests.conftest import in_process, log_rows
from tests.support.edge_upstream import EdgeUpstream, Reply

VARIABLE = "EMPTY_KEY_FOR_TEST"
PROXY_KEY = "proxy-key-for-the-empty-variable-test"


@pytest.fixture
def edge() -> Iterator[EdgeUpstream]:
    server = EdgeUpstream().start()
    server.reply = Reply.json({"error": "must not be reached"})
    yield server
    server.stop()


def _settings(edge: EdgeUpstream, mode: str) -> Any:
    key = {"api_key_env": VARIABLE}
    return settings_from_mapping(
        {
            "auth": {"mode": mode},
            "upstreams": [
                {
                    "name": "claude",
                    "kind": "anthropic",
                    "match": ["claude-*"],
                    "base_url": edge.url,
                    **key,
                },
                {
                    "name": "gemini",
                    "kind": "gemini",
                    "match": ["gemini-*"],
                    "base_url": edge.url,
                    **key,
                },
                {"name": "openai", "match": ["*"], "base_url": edge.base_url, **key},
            ],
            "pipeline": {"on_rule_error": "fail"},
        }
    )


CHAT = {"messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {"max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
# (path, body, where the error's code and message are read)
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("/v1/chat/completions", {"model": "gpt-4o", **CHAT}, "openai"),
    ("/v1/chat/completions", {"model": "gpt-4o", "stream": True, **CHAT}, "openai"),
    ("/v1/chat/completions", {"model": "claude-sonnet-4-5", **CHAT}, "openai"),
    ("/v1/responses", {"model": "gpt-4o", "input": "hi"}, "openai"),
    ("/v1/messages", {"model": "claude-sonnet-4-5", **MESSAGES}, "anthropic"),
    ("/v1/messages", {"model": "claude-sonnet-4-5", "stream": True, **MESSAGES}, "anthropic"),
    ("/v1/messages", {"model": "gpt-4o", **MESSAGES}, "anthropic"),  # bridged by litellm
    ("/v1/messages/count_tokens", {"model": "claude-sonnet-4-5", **MESSAGES}, "anthropic"),
    (
        "/v1beta/models/gemini-2.5-flash:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        "gemini",
    ),
    (
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        "gemini",
    ),
]


def _error(shape: str, answer: dict[str, Any]) -> tuple[str, str]:
    """(the code or type the shape carries, the message)."""
    error = answer["error"]
    if shape == "anthropic":
        assert answer["type"] == "error"
        return error["type"], error["message"]
    if shape == "gemini":
        assert error["code"] == 500
        return error["status"], error["message"]
    return error["code"], error["message"]


@pytest.mark.parametrize("mode", ["passthrough", "keys"])
@pytest.mark.parametrize(("path", "body", "shape"), CASES)
async def test_every_protocol_is_refused_before_anything_is_sent(
    tmp_path: Path,
    edge: EdgeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    mode: str,
    path: str,
    body: dict[str, Any],
    shape: str,
) -> None:
    monkeypatch.setenv(VARIABLE, " \n")
    monkeypatch.setenv("CTXPROXY_KEYS", PROXY_KEY)
    # in passthrough, the client's own key is not a way round the upstream's named variable
    headers = {
        "authorization": f"Bearer {PROXY_KEY if mode == 'keys' else 'sk-client-own-0000'}",
        "x-api-key": PROXY_KEY if mode == "keys" else "sk-ant-client-own-0000",
        "x-goog-api-key": PROXY_KEY if mode == "keys" else "client-own-gemini-0000",
    }
    async with in_process(_settings(edge, mode), str(tmp_path / "db")) as client:
        r = await client.post(path, json=body, headers=headers)
        rows = await log_rows(client)
    assert r.status_code == 500, r.text
    code, message = _error(shape, r.json())
    expected = {"openai": "upstream_key_missing", "anthropic": "api_error", "gemini": "INTERNAL"}
    assert code == expected[shape]
    assert "has no API key configured" in message and VARIABLE not in r.text
    assert edge.connections == 0  # nothing went upstream, with or without a key
    assert rows[-1]["status"] == 500 and rows[-1]["error_type"] == "upstream_key_missing"
    assert VARIABLE in caplog.text  # the operator is told which variable


async def test_a_model_list_says_the_upstream_could_not_be_listed(
    tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    async with in_process(_settings(edge, "passthrough"), str(tmp_path / "db")) as client:
        r = await client.get("/v1/models", headers={"authorization": "Bearer sk-client-own"})
    assert r.status_code == 200, r.text
    unlisted = r.json()["ctxproxy_unlisted"]
    assert unlisted["upstream"] == "openai" and "has no API key configured" in unlisted["error"]
    assert edge.connections == 0


def test_the_start_up_warning_says_the_requests_are_refused(tmp_path: Path) -> None:
    edge_url = "http://127.0.0.1:9"
    settings = settings_from_mapping(
        {
            "upstreams": [
                {"name": "openai", "match": ["*"], "base_url": edge_url, "api_key_env": VARIABLE}
            ]
        }
    )
    (line,) = unset_key_variables(settings, {})
    assert "is not set" in line and "refused (500 upstream_key_missing)" in line
    assert "without a key" not in line
