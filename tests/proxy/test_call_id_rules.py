"""Which tool-call ids each upstream accepts, from its settings, and the chain repair through a
live proxy: ids an OpenAI-compatible server made go back to it byte for byte; for OpenAI's own
API a conversation carried over with longer ids is forwarded with ids it accepts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest

from proxy.call_id_rules import call_id_rule
from proxy.upstream_settings import UpstreamSettings
from tests.conftest import proxy_settings
from tests.support.fake_upstream import FakeUpstream


def _up(**fields: Any) -> UpstreamSettings:
    return UpstreamSettings(name="u", **fields)


@pytest.mark.parametrize(
    ("fields", "protocol", "rule"),
    [
        ({}, "chat", "openai"),  # OpenAI's own API by default
        ({}, "responses", "openai_responses"),
        ({"base_url": "https://myres.openai.azure.com/openai/v1"}, "chat", "openai"),
        ({"base_url": "https://api.mistral.ai/v1"}, "chat", "mistral"),
        ({"base_url": "http://10.0.0.5:8000/v1"}, "chat", "any"),  # vLLM, SGLang …
        ({"base_url": "https://api.moonshot.ai/v1"}, "chat", "any"),  # Kimi
        ({"kind": "anthropic"}, "anthropic", "anthropic"),
        ({"kind": "anthropic"}, "chat", "anthropic"),
        ({"kind": "gemini"}, "gemini", "any"),
        ({"kind": "litellm", "provider": "bedrock"}, "chat", "anthropic"),
        ({"kind": "litellm", "provider": "mistral"}, "chat", "mistral"),
        ({"kind": "litellm", "provider": "cohere"}, "chat", "anthropic"),  # not known: strictest
        ({"base_url": "http://10.0.0.5:8000/v1", "call_ids": "anthropic"}, "chat", "anthropic"),
        ({"kind": "anthropic", "call_ids": "openai"}, "responses", "openai_responses"),
    ],
)
def test_the_rule_follows_the_upstream(fields: dict[str, Any], protocol: str, rule: str) -> None:
    assert call_id_rule(_up(**fields), protocol) == rule


def test_no_upstream_is_the_strictest_rule() -> None:
    assert call_id_rule(None, "chat") == "anthropic"


VLLM = "chatcmpl-tool-" + "0123456789abcdef" * 2  # 46 characters


def _history(*ids: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "run the tests"}]
    for cid in ids:
        fn = {"name": "Bash", "arguments": '{"command": "pytest -q"}'}
        messages += [
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": cid, "type": "function", "function": fn}]},
            {"role": "tool", "tool_call_id": cid, "content": "3 passed"},
        ]  # fmt: skip
    return messages


def _forwarded_ids(body: dict[str, Any]) -> list[str]:
    ids = []
    for m in body["messages"]:
        ids += [c["id"] for c in m.get("tool_calls") or []]
        if m["role"] == "tool":
            ids.append(m["tool_call_id"])
    return ids


def test_kimi_ids_reach_a_compatible_server_as_sent(
    live_proxy: Callable[..., Any], fake_upstream: FakeUpstream
) -> None:
    proxy = live_proxy()  # a loopback server: an OpenAI-compatible one
    client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    client.chat.completions.create(
        model="kimi-k2", messages=_history("functions.Bash:0", "functions.Bash:1")
    )
    assert _forwarded_ids(fake_upstream.last) == [
        "functions.Bash:0", "functions.Bash:0", "functions.Bash:1", "functions.Bash:1"
    ]  # fmt: skip


def test_openai_gets_ids_it_accepts_and_the_same_ones_again(
    live_proxy: Callable[..., Any], fake_upstream: FakeUpstream
) -> None:
    settings = proxy_settings(fake_upstream.base_url)
    settings.upstreams[0].call_ids = "openai"  # as OpenAI's own API, on loopback
    proxy = live_proxy(settings)
    client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    forwarded = []
    for _ in range(2):
        client.chat.completions.create(model="gpt-5", messages=_history(VLLM, "call_1"))
        forwarded.append(_forwarded_ids(fake_upstream.last))
    ids = forwarded[0]
    assert all(len(i) <= 40 for i in ids) and ids[0] == ids[1] and ids[0] != VLLM
    assert ids[2:] == ["call_1", "call_1"]
    assert forwarded[1] == ids  # the same ids on every request: the prefix stays cached
