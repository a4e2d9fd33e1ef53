"""A Gemini client's ``?key=`` is percent-decoded, so unlike a header it can hold a control
character (``%0d%0a``, ``%00``), which no HTTP header can carry: moved into the upstream's
``x-goog-api-key`` it made the HTTP client raise, a 500 "Internal error in ctxproxy" (a 502
naming the upstream through litellm). It is refused with 401 in Gemini's shape, nothing sent."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from proxy.settings import Settings, settings_from_mapping
from tests.conftest import in_process
from tests.support.edge_upstream import EdgeUpstream

GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
PATHS = {
    "generateContent": "/v1beta/models/gemini-x:generateContent",
    "streamGenerateContent": "/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
    "countTokens": "/v1beta/models/gemini-x:countTokens",
    "bridged": "/v1beta/models/gpt-x:generateContent",
}


def _settings(edge: EdgeUpstream) -> Settings:
    return settings_from_mapping(
        {
            "upstreams": [
                {"name": "g", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url},
                {"name": "openai", "match": ["*"], "base_url": edge.base_url},
            ],
            "pipeline": {"on_rule_error": "fail"},
        }
    )


@pytest.mark.parametrize("key", ["a%0d%0ax-evil:%201", "a%00b", "a%0bb", "a%7fb"])
@pytest.mark.parametrize("path", PATHS)
async def test_a_query_key_with_a_control_character_is_a_401(
    tmp_path: Path, edge: EdgeUpstream, path: str, key: str
) -> None:
    url = PATHS[path] + ("&" if "?" in PATHS[path] else "?") + f"key={key}"
    async with in_process(_settings(edge), str(tmp_path / "db")) as client:
        r = await client.post(url, json=GEMINI)
    answer = orjson.loads(r.content)
    assert r.status_code == 401, answer
    assert answer["error"]["status"] == "UNAUTHENTICATED"
    assert "header" in answer["error"]["message"]
    assert edge.seen == []


@pytest.mark.parametrize("path", ["/v1beta/models", "/v1beta/models/gemini-x"])
async def test_model_list_with_such_a_key_is_a_401(
    tmp_path: Path, edge: EdgeUpstream, path: str
) -> None:
    async with in_process(_settings(edge), str(tmp_path / "db")) as client:
        r = await client.get(path + "?key=a%0d%0ab")
    assert r.status_code == 401, r.text
    assert orjson.loads(r.content)["error"]["status"] == "UNAUTHENTICATED"
    assert edge.seen == []


async def test_a_plain_query_key_goes_as_the_header(tmp_path: Path, edge: EdgeUpstream) -> None:
    edge.reply.body = orjson.dumps({"candidates": []})
    async with in_process(_settings(edge), str(tmp_path / "db")) as client:
        r = await client.post(PATHS["generateContent"] + "?key=AIza%20x", json=GEMINI)
    assert r.status_code == 200, r.text
    assert edge.last.header("x-goog-api-key") == "AIza x"
    assert "key=" not in edge.last.target
