"""A litellm upstream's provider is fixed by config: a model name whose prefix (or, for a bare
name, litellm's own lookup) names another provider is refused with 404 before anything is sent,
and litellm is told the configured provider, so it can never pick another one by itself.

Two loopback servers at the socket level: the "real" upstream (Anthropic's Messages API, where
``ANTHROPIC_API_BASE`` sends litellm) and an "attacker" that every other provider's default base
points at (``OPENAI_BASE_URL``, ``OLLAMA_API_BASE``, ``HOSTED_VLLM_API_BASE``): a request the
proxy let through to another provider would land there, carrying the server's key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message, request, user

CONFIG_KEY = "sk-ant-config-key-000000000000"
ANTHROPIC_REPLY = anthropic_message("from the real upstream", model="claude-x")
OPENAI_REPLY = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": "x",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "pwned"}, "finish_reason": "stop"}
    ],
}
# Two ways to get a broad match: an explicit provider, or one derived from the patterns (the
# ``*`` names none, ``claude-*`` none litellm knows, ``anthropic/*`` names anthropic).
CONFIGS = {
    "explicit": {"match": ["*"], "provider": "anthropic"},
    "derived": {"match": ["anthropic/*", "claude-*", "*"]},
}
# Names that pick another provider: by prefix, or (gpt-4o) by litellm's own model list.
OTHER_PROVIDERS = ["openai/gpt-4o", "ollama/llama3", "hosted_vllm/x", "gpt-4o"]


@pytest.fixture
def real() -> Iterator[EdgeUpstream]:
    server = EdgeUpstream().start()
    server.reply = Reply.json(ANTHROPIC_REPLY)
    yield server
    server.stop()


@pytest.fixture
def attacker() -> Iterator[EdgeUpstream]:
    server = EdgeUpstream().start()
    server.reply = Reply.json(OPENAI_REPLY)
    yield server
    server.stop()


def _settings(
    config: str, real: EdgeUpstream, attacker: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> Any:
    monkeypatch.setenv("CONFIG_ANTHROPIC_KEY", CONFIG_KEY)
    monkeypatch.setenv("ANTHROPIC_API_BASE", real.url)  # stands in for api.anthropic.com
    for name in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "HOSTED_VLLM_API_BASE"):
        monkeypatch.setenv(name, attacker.base_url)
    monkeypatch.setenv("OLLAMA_API_BASE", attacker.url)
    spec = {
        "name": "anthropic",
        "kind": "litellm",
        "api_key_env": "CONFIG_ANTHROPIC_KEY",
        **CONFIGS[config],
    }
    return proxy_settings("http://unused.test/v1", upstreams=[spec])


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("model", OTHER_PROVIDERS)
async def test_a_model_naming_another_provider_is_refused_and_sent_nowhere(
    tmp_path: Path,
    real: EdgeUpstream,
    attacker: EdgeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    config: str,
    model: str,
) -> None:
    settings = _settings(config, real, attacker, monkeypatch)
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=request(user("hi"), model=model))
        rows = await log_rows(client)
    assert r.status_code == 404, r.text
    error = r.json()["error"]
    assert error["code"] == "model_not_found" and error["type"] == "invalid_request_error"
    assert error["param"] == "model" and f"'{model}'" in error["message"]
    assert attacker.connections == 0, f"the attacker got {attacker.seen}"
    assert real.connections == 0
    assert rows[0]["status"] == 404 and rows[0]["error_type"] == "model_not_found"


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("model", ["anthropic/claude-x", "claude-x"])
async def test_the_configured_provider_is_the_one_litellm_uses(
    tmp_path: Path,
    real: EdgeUpstream,
    attacker: EdgeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    config: str,
    model: str,
) -> None:
    """``claude-x`` is a name litellm cannot place by itself: it reaches Anthropic only because
    the proxy passes the configured provider. Smuggled routing fields change nothing."""
    settings = _settings(config, real, attacker, monkeypatch)
    body = request(
        user("hi"),
        model=model,
        max_tokens=50,
        api_base=attacker.base_url,
        custom_llm_provider="openai",
    )
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "from the real upstream"
    assert attacker.connections == 0
    (seen,) = real.seen
    assert seen.target == "/v1/messages" and seen.header("x-api-key") == CONFIG_KEY
    assert seen.json()["model"] == "claude-x"


async def test_a_long_model_name_is_clipped_in_the_answer(
    tmp_path: Path, real: EdgeUpstream, attacker: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings("explicit", real, attacker, monkeypatch)
    model = "openai/" + "x" * 240  # under the 256-character limit of a model name
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=request(user("hi"), model=model))
        too_long = await client.post(
            "/v1/chat/completions", json=request(user("hi"), model="openai/" + "x" * 5000)
        )
    assert r.status_code == 404
    message = r.json()["error"]["message"]
    assert len(message) < 400 and "openai/xxx" in message and "…" in message
    assert too_long.status_code == 400 and len(too_long.json()["error"]["message"]) < 200
    assert attacker.connections == 0 and real.connections == 0


def test_provider_verdicts_are_memoised_within_a_bound() -> None:
    from proxy.upstream import litellm as litellm_upstream
    from proxy.upstream.litellm import model_uses_provider

    for i in range(3_000):
        assert model_uses_provider("anthropic", f"anthropic/m{i}")
        assert not model_uses_provider("anthropic", f"openai/m{i}")
    assert len(litellm_upstream._VERDICTS) <= 1024
    assert model_uses_provider("anthropic", "claude-x")  # litellm cannot place it
    assert model_uses_provider("anthropic", "anthropic/claude-2")  # anthropic_text, within it
    assert not model_uses_provider("anthropic", "gpt-4o")
    # litellm places the bare name on vertex_ai, but the gemini list holds it
    assert model_uses_provider("gemini", "gemini-2.5-pro")
    assert not model_uses_provider("gemini", "gpt-4o")
    assert not model_uses_provider("openai", "gemini-2.5-pro")
    # a known prefix is not looked up (github_copilot's lookup would start an OAuth flow)
    assert not model_uses_provider("anthropic", "github_copilot/gpt-4o")


async def test_a_provider_litellm_does_not_know_fails_clearly(
    tmp_path: Path, real: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``meta-llama/*`` names no litellm provider: the request is refused by the proxy (and the
    log says why) rather than left to litellm's guess."""
    monkeypatch.setenv("CONFIG_ANTHROPIC_KEY", CONFIG_KEY)
    spec = {
        "name": "llama",
        "kind": "litellm",
        "match": ["meta-llama/*"],
        "base_url": real.url,
        "api_key_env": "CONFIG_ANTHROPIC_KEY",
    }
    settings = proxy_settings("http://unused.test/v1", upstreams=[spec])
    async with in_process(settings, str(tmp_path / "db")) as client:
        body = request(user("hi"), model="meta-llama/llama-3")
        r = await client.post("/v1/chat/completions", json=body)
    assert r.status_code == 500
    error = r.json()["error"]
    assert error["code"] == "upstream_misconfigured" and "provider" in error["message"]
    assert real.connections == 0
