"""A model name that reaches a provider whose URL litellm builds from it (Gemini's
``{base}/models/{model}:generateContent``) may not walk out of that path: ``..`` segments, a
query or a fragment sent a tenant's body to any endpoint of the provider's host with the
gateway's key (cached contents, tuned models, the Files upload). It is refused with a 400 and
nothing is sent; names providers use pass."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proxy.upstream.url_model import safe_in_url
from tests.conftest import in_process, proxy_settings
from tests.proxy.upstream.test_bridge_stream_open import KEY
from tests.support.edge_upstream import EdgeUpstream, Reply

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"  # litellm on httpx, as the other bridge tests
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)
ASK = [{"role": "user", "content": "hi"}]
WALKING = [
    "gemini-x/../../../v1beta/cachedContents?",
    "gemini-x/../../../upload/v1beta/files?uploadType=media&",
    "gemini-x/../../../v1beta/tunedModels/victim",
    "gemini-echo?key=x",
    "gemini-2.5-pro:predictLongRunning",
    "gemini-x#frag",
    "gemini-e\x00",
    "gemini-e\r\nx-a: b",
    "gemini-%2e%2e",
]


@pytest.mark.parametrize("model", WALKING)
@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("/v1/chat/completions", {"messages": ASK}),
        ("/v1/responses", {"input": "hi"}),
        ("/v1/messages", {"messages": ASK, "max_tokens": 8}),
    ],
)
async def test_a_name_walking_out_of_the_gemini_path_is_refused(
    tmp_path: Path,
    edge: EdgeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    path: str,
    extra: dict[str, object],
) -> None:
    edge.reply = Reply.json({"candidates": []})
    upstream = {"name": "gem", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url,
                "api_key_env": "CTXPROXY_TEST_GEMINI_KEY"}  # fmt: skip
    monkeypatch.setenv("CTXPROXY_TEST_GEMINI_KEY", KEY)  # the gateway's key
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(path, json={"model": model, **extra}, headers={"x-api-key": KEY})
    assert r.status_code == 400, r.text
    assert "model" in r.text
    assert edge.seen == []  # nothing reached the provider's host


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("gemini", "gemini-2.5-flash"),
        ("gemini", "gemini/gemini-2.5-pro"),
        ("vertex_ai", "claude-3-5-sonnet@20240620"),
        ("vertex_ai", "meta/llama3-405b-instruct-maas"),
        ("anthropic", "claude-sonnet-4-5"),
        ("bedrock", "arn:aws:bedrock:us-east-1:123:inference-profile/us.anthropic.claude-v2"),
        ("openrouter", "meta-llama/llama-3-8b-instruct:free"),
    ],
)
def test_names_providers_use_pass(provider: str, model: str) -> None:
    assert safe_in_url(provider, model)


@pytest.mark.parametrize("provider", ["vertex_ai", "bedrock", "gemini"])
def test_a_walking_name_is_refused_for_every_provider(provider: str) -> None:
    for model in ("a/../../b", "a/./b", "a//b", "a?b", "a#b", "a b", "a%2e"):
        assert not safe_in_url(provider, model), (provider, model)
