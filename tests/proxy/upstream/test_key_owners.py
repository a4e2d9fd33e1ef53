"""A provider's key, known by its shape, never goes to another provider's own API: with the
shipped config a Gemini CLI asking for a model only the catch-all matches reaches the OpenAI
upstream, and its Google key would have gone to api.openai.com. Refused unsent, in the client's
protocol; a gateway's host (any other) still gets whatever key the client sends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from proxy.errors import ModelNotFound
from proxy.settings import UpstreamSettings, settings_from_mapping
from proxy.upstream.key_owners import host_owner, key_owner, require_owned
from tests.conftest import in_process
from tests.support.edge_upstream import EdgeUpstream

ROOT = Path(__file__).resolve().parents[3]
GOOGLE_KEY = "AIzaSyClientKeyForGoogle000000000000000"
ANTHROPIC_KEY = "sk-ant-api03-client-key-for-anthropic"
OPENAI_KEY = "sk-proj-client-key-for-openai"


def shipped() -> Any:
    data = yaml.safe_load((ROOT / "config.example.yaml").read_text())
    data.pop("store", None)
    return settings_from_mapping(data)


def test_keys_and_hosts_are_told_by_their_shape() -> None:
    assert key_owner(GOOGLE_KEY) == "Google" and key_owner("ya29.a0token") == "Google"
    assert key_owner(ANTHROPIC_KEY) == "Anthropic" and key_owner(OPENAI_KEY) == "OpenAI"
    assert key_owner("sk-or-v1-openrouter") is None and key_owner("gateway-key") is None
    assert host_owner(UpstreamSettings(name="o")) == "OpenAI"
    assert host_owner(UpstreamSettings(name="a", kind="anthropic")) == "Anthropic"
    assert host_owner(UpstreamSettings(name="g", kind="gemini")) == "Google"
    gateway = UpstreamSettings(name="o", base_url="https://openrouter.ai/api/v1")
    assert host_owner(gateway) is None
    assert host_owner(UpstreamSettings(name="o", base_url="https://API.openai.com./v1")) == "OpenAI"
    litellm = UpstreamSettings(name="l", kind="litellm", provider="anthropic", match=["claude-*"])
    assert host_owner(litellm) == "Anthropic"


def test_a_foreign_key_is_refused_and_an_own_or_unknown_one_passes() -> None:
    openai = UpstreamSettings(name="openai")
    with pytest.raises(ModelNotFound) as refused:
        require_owned(openai, GOOGLE_KEY, "gemma-3-27b-it")
    assert "gemma-3-27b-it" in refused.value.message and GOOGLE_KEY not in refused.value.message
    with pytest.raises(ModelNotFound):
        require_owned(UpstreamSettings(name="g", kind="gemini"), ANTHROPIC_KEY, "gemini-2.5-pro")
    require_owned(openai, OPENAI_KEY, "gpt-4o")
    require_owned(openai, "sk-legacy-or-other", "gpt-4o")
    require_owned(openai, None, "gpt-4o")
    require_owned(UpstreamSettings(name="gw", base_url="http://10.0.0.5/v1"), GOOGLE_KEY, "x")


GEMMA = "/v1beta/models/learnlm-2.0-flash:generateContent"  # a model only the catch-all takes
GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
CHAT_BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES_BODY = {
    "model": "gpt-4o",
    "max_tokens": 8,
    "messages": [{"role": "user", "content": "hi"}],
}


@pytest.mark.parametrize(
    ("path", "body", "headers", "shape"),
    [
        (GEMMA, GEMINI_BODY, {"x-goog-api-key": GOOGLE_KEY}, "gemini"),
        (GEMMA + f"?key={GOOGLE_KEY}", GEMINI_BODY, {}, "gemini"),
        ("/v1/chat/completions", CHAT_BODY, {"authorization": f"Bearer {ANTHROPIC_KEY}"}, "openai"),
        ("/v1/messages", MESSAGES_BODY, {"x-api-key": ANTHROPIC_KEY}, "anthropic"),
    ],
)
async def test_the_shipped_config_never_sends_a_key_to_another_provider(
    tmp_path: Path, path: str, body: dict[str, Any], headers: dict[str, str], shape: str
) -> None:
    async with in_process(shipped(), str(tmp_path / "p.db")) as client:
        sent = {"content-type": "application/json", "anthropic-version": "2023-06-01", **headers}
        r = await client.post(path, content=orjson.dumps(body), headers=sent, timeout=30)
    assert r.status_code == 404, r.text
    assert GOOGLE_KEY not in r.text and ANTHROPIC_KEY not in r.text
    error = r.json()["error"]
    message = error["message"]
    assert "goes to upstream openai, OpenAI's API" in message
    if shape == "anthropic":
        assert r.json()["type"] == "error" and error["type"] == "not_found_error"
    elif shape == "gemini":
        assert error["status"] == "NOT_FOUND"


async def test_a_gateway_gets_whatever_key_the_client_sends(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    settings = settings_from_mapping(
        {"upstreams": [{"name": "gateway", "match": ["*"], "base_url": edge.base_url}]}
    )
    async with in_process(settings, str(tmp_path / "p.db")) as client:
        r = await client.post(
            "/v1/chat/completions",
            content=orjson.dumps(CHAT_BODY),
            headers={"content-type": "application/json", "authorization": f"Bearer {GOOGLE_KEY}"},
        )
    assert r.status_code == 200, r.text
    assert edge.last.header("authorization") == f"Bearer {GOOGLE_KEY}"


async def test_a_model_list_sends_no_key_to_another_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model lists ask the upstream with the client's key: not another provider's."""
    from proxy.upstream.openai import UpstreamClient

    asked: list[tuple[str, str | None]] = []

    async def models(self: Any, upstream: Any, key: str | None, *args: Any, **kw: Any) -> Any:
        asked.append((upstream.name, key))
        return 200, b'{"object": "list", "data": [], "has_more": false}'

    monkeypatch.setattr(UpstreamClient, "models", models)
    async with in_process(shipped(), str(tmp_path / "p.db")) as client:
        for key in (GOOGLE_KEY, ANTHROPIC_KEY):
            r = await client.get("/v1/models", headers={"authorization": f"Bearer {key}"})
            assert r.status_code == 200 and "not sent" in r.json()["ctxproxy_unlisted"]["error"]
        r = await client.get(
            "/v1/models", headers={"anthropic-version": "2023-06-01", "x-api-key": GOOGLE_KEY}
        )
        assert r.status_code == 200 and "data" in r.json()
        assert asked == []
        await client.get("/v1/models", headers={"authorization": f"Bearer {OPENAI_KEY}"})
        await client.get(
            "/v1/models", headers={"anthropic-version": "2023-06-01", "x-api-key": ANTHROPIC_KEY}
        )
    assert [name for name, _ in asked] == ["openai", "claude"]
