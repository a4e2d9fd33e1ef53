"""Body fields that would steer litellm (where to call, with which headers, key or provider, or to
answer without calling at all) never reach it: the upstream and its key come from config only.

Two loopback servers at the socket level: the "real" upstream the config names (answering as
Anthropic's Messages API), and an "attacker" one that no request may ever reach. Three configs:
- pinned: the upstream has a ``base_url`` (the real server) and an ``api_key_env``;
- default: no ``base_url``, so litellm uses its own default, here ``ANTHROPIC_API_BASE`` pointing
  at the real server (it stands in for api.anthropic.com);
- passthrough: as default, without ``api_key_env``: the client's own key goes upstream, never the
  ``ANTHROPIC_API_KEY`` the proxy's environment holds (test_litellm_client_key.py: a client with
  no key gets 401).
In each, ``CONFIG_KEY`` is the key config says to use: the server's, or in passthrough the
client's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message, request, user

MODEL = "anthropic/claude-3-5-sonnet-20241022"
CONFIG_KEY = "sk-ant-config-key-000000000000"
ENV_KEY = "sk-ant-proxy-environment-22222"
ATTACKER_KEY = "sk-ant-attacker-111111111111"
ANTHROPIC_REPLY = anthropic_message("from the real upstream", model="claude-3-5-sonnet-20241022")
OVERLOADED = {"type": "error", "error": {"type": "api_error", "message": "try again"}}
# What the attacker answers (OpenAI's shape, so a call steered to it would succeed).
ATTACKER_REPLY = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": "x",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "pwned"}, "finish_reason": "stop"}
    ],
}


def _anthropic_sse() -> bytes:
    events = [
        ("message_start", {"type": "message_start", "message": {**ANTHROPIC_REPLY, "content": []}}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "from the real upstream"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 4},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(
        b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
        for name, data in events
    )


@pytest.fixture
def real() -> Iterator[EdgeUpstream]:
    server = EdgeUpstream().start()
    server.reply = Reply.json(ANTHROPIC_REPLY)
    yield server
    server.stop()


@pytest.fixture
def attacker() -> Iterator[EdgeUpstream]:
    server = EdgeUpstream().start()
    server.reply = Reply.json(ATTACKER_REPLY)
    yield server
    server.stop()


def _settings(config: str, real: EdgeUpstream, monkeypatch: pytest.MonkeyPatch) -> Any:
    upstream: dict[str, Any] = {"name": "anthropic", "match": ["anthropic/*"], "kind": "litellm"}
    monkeypatch.setenv("CONFIG_ANTHROPIC_KEY", CONFIG_KEY)
    # litellm's own default base for Anthropic, standing in for https://api.anthropic.com
    monkeypatch.setenv("ANTHROPIC_API_BASE", real.url)
    if config == "pinned":
        upstream.update(base_url=real.url, api_key_env="CONFIG_ANTHROPIC_KEY")
    elif config == "default":
        upstream.update(api_key_env="CONFIG_ANTHROPIC_KEY")
    else:  # passthrough: litellm would find this one in the proxy's environment
        monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)
    return proxy_settings("http://unused.test/v1", upstreams=[upstream])


def _client_headers(config: str) -> dict[str, str]:
    """In passthrough the client sends its own key; otherwise none (config holds it)."""
    return {"authorization": f"Bearer {CONFIG_KEY}"} if config == "passthrough" else {}


def _variants(attacker: str) -> dict[str, dict[str, Any]]:
    """Each smuggling attempt: the fields a client adds to an otherwise ordinary body."""
    steer = {"api_base": attacker, "base_url": attacker, "api_key": ATTACKER_KEY}
    return {
        "api_base": {"api_base": attacker},
        "base_url": {"base_url": attacker},
        "provider_and_api_base": {"custom_llm_provider": "openai", "api_base": attacker + "/v1"},
        "api_key": {"api_key": ATTACKER_KEY},
        "extra_headers": {"extra_headers": {"x-smuggled": "1", "x-api-key": ATTACKER_KEY}},
        "headers": {"headers": {"x-smuggled": "1"}},
        "extra_body": {"extra_body": {"smuggled": "1"}},
        "litellm_params": {"litellm_params": steer},
        "metadata": {
            "metadata": {**steer, "model_info": {"id": "x"}, "headers": {"x-smuggled": "1"}},
            "litellm_metadata": steer,
        },
        "mock_response": {"mock_response": "pwned"},
        "model_list": {
            "model_list": [{"model_name": MODEL, "litellm_params": {"model": "openai/x", **steer}}]
        },
        "fallbacks": {"fallbacks": [{"model": "openai/x", **steer}]},
        "num_retries": {"num_retries": 3, "max_retries": 3},
    }


# Variants whose effect shows only when the real upstream fails (a retry, a fallback).
FAILING_FIRST = {"fallbacks", "num_retries"}


@pytest.mark.parametrize("config", ["pinned", "default", "passthrough"])
@pytest.mark.parametrize("variant", sorted(_variants("http://x")))
async def test_smuggled_fields_reach_neither_attacker_nor_upstream(
    tmp_path: Path,
    real: EdgeUpstream,
    attacker: EdgeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    config: str,
    variant: str,
) -> None:
    if variant in FAILING_FIRST:
        real.reply = Reply.json(OVERLOADED, status=500)
    settings = _settings(config, real, monkeypatch)
    body = request(user("hello"), model=MODEL, max_tokens=50, **_variants(attacker.url)[variant])
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=body, headers=_client_headers(config))
        rows = await log_rows(client)
    assert attacker.connections == 0, f"the attacker got {attacker.seen}"
    assert len(real.seen) == 1  # called once: no mock answer, no retry, no fallback
    seen = real.last
    assert seen.target == "/v1/messages"
    assert seen.header("x-api-key") == CONFIG_KEY
    assert seen.header("x-smuggled") is None and seen.header("authorization") is None
    assert b"smuggled" not in seen.body and ATTACKER_KEY.encode() not in seen.body
    if variant in FAILING_FIRST:
        assert r.status_code == 500, r.text
    else:
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"] == "from the real upstream"
    assert rows[0]["upstream"] == "anthropic" and rows[0]["status"] == r.status_code


@pytest.mark.parametrize("config", ["default", "passthrough"])
async def test_smuggled_api_base_is_ignored_when_streaming(
    tmp_path: Path,
    real: EdgeUpstream,
    attacker: EdgeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    config: str,
) -> None:
    real.reply = Reply(headers=[("content-type", "text/event-stream")], chunks=[_anthropic_sse()])
    settings = _settings(config, real, monkeypatch)
    body = request(
        user("hello"),
        model=MODEL,
        max_tokens=50,
        stream=True,
        api_base=attacker.url,
        extra_headers={"x-smuggled": "1"},
    )
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=body, headers=_client_headers(config))
    assert r.status_code == 200
    assert "from the real upstream" in r.text and r.text.endswith("data: [DONE]\n\n")
    assert attacker.connections == 0
    assert [s.header("x-smuggled") for s in real.seen] == [None]


async def test_plain_text_cross_site_post_is_refused_before_any_upstream(
    tmp_path: Path, real: EdgeUpstream, attacker: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A web page can POST ``text/plain`` (or a body with no type at all) to a sidecar without a
    CORS preflight; such a body is not JSON to us, whatever it holds."""
    settings = _settings("passthrough", real, monkeypatch)
    body = orjson.dumps(request(user("hello"), model=MODEL, api_base=attacker.url))
    async with in_process(settings, str(tmp_path / "db")) as client:
        plain = await client.post(
            "/v1/chat/completions", content=body, headers={"content-type": "text/plain"}
        )
        untyped = await client.post("/v1/chat/completions", content=body)
        rows = await log_rows(client)
    for r in (plain, untyped):
        assert r.status_code == 415
        assert r.json()["error"]["code"] == "unsupported_media_type"
    assert [row["status"] for row in rows] == [415, 415]
    assert attacker.connections == 0 and real.connections == 0


def test_forwarded_params_keep_only_request_parameters() -> None:
    from proxy.upstream.litellm import forwarded_params

    body = request(
        user("hi"),
        model=MODEL,
        stream=True,
        temperature=0.2,
        tools=[],
        tool_choice="auto",
        response_format={"type": "json_object"},
        api_base="http://x",
        litellm_params={},
        metadata={"session_id": "s"},
        aws_region_name="us-east-1",
        vertex_project="p",
        input_cost_per_token=1.0,
        callbacks=["webhook"],
        timeout=0.001,
    )
    kept, dropped = forwarded_params(body)
    assert kept == {
        "temperature": 0.2,
        "tools": [],
        "tool_choice": "auto",
        "response_format": {"type": "json_object"},
    }
    assert "api_base" in dropped and "metadata" in dropped and "model" not in dropped


def test_allow_list_holds_no_transport_or_routing_parameter() -> None:
    """Cross-checked against litellm: every allowed name is one of its OpenAI request parameters,
    none is one it reads to pick a URL, key, header, provider or client."""
    from litellm.constants import OPENAI_CHAT_COMPLETION_PARAMS

    from proxy.upstream.litellm import ALLOWED_PARAMS

    transport = {
        "api_base",
        "base_url",
        "api_key",
        "api_version",
        "organization",
        "deployment_id",
        "default_headers",
        "extra_headers",
        "timeout",
        "request_timeout",
        "max_retries",
    }
    assert ALLOWED_PARAMS.issubset(set(OPENAI_CHAT_COMPLETION_PARAMS) - transport)
    assert not ALLOWED_PARAMS & {"model", "messages", "stream", "metadata", "extra_body"}
