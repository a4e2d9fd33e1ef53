"""An upstream with no such path (a ``base_url`` missing its ``/v1``, or with one too many)
answers a bare 404 page: the client gets it in its own protocol's error shape, with the likely
cause, and an API's own JSON error is relayed as it came."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply

ASK = [{"role": "user", "content": "hi"}]
KEY = "sk-test-wrong-path-0000"


def _said(protocol: str, body: bytes) -> str:
    value = orjson.loads(body)
    if protocol == "messages":
        assert value["type"] == "error" and value["error"]["type"] == "not_found_error"
        return str(value["error"]["message"])
    if protocol == "gemini":
        assert value["error"]["status"] == "NOT_FOUND" and value["error"]["code"] == 404
    return str(value["error"]["message"])


@pytest.mark.parametrize(
    ("protocol", "upstream", "path", "body", "hint"),
    [
        ("chat", {"kind": "openai"}, "/v1/chat/completions",
         {"model": "llama3", "messages": ASK}, "/v1"),
        ("chat", {"kind": "openai"}, "/v1/chat/completions",
         {"model": "llama3", "messages": ASK, "stream": True}, "/v1"),
        ("responses", {"kind": "openai"}, "/v1/responses", {"model": "llama3", "input": "hi"},
         "/v1"),
        ("messages", {"kind": "anthropic"}, "/v1/messages",
         {"model": "claude-x", "messages": ASK, "max_tokens": 9}, "without /v1"),
        ("gemini", {"kind": "gemini"}, "/v1beta/models/gemini-x:generateContent",
         {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, "generativelanguage"),
    ],
)  # fmt: skip
async def test_a_bare_404_is_said_in_the_clients_shape_with_its_likely_cause(
    tmp_path: Path,
    edge: EdgeUpstream,
    protocol: str,
    upstream: dict[str, str],
    path: str,
    body: dict[str, object],
    hint: str,
) -> None:
    edge.reply = Reply(404, [("content-type", "text/plain")], b"404 page not found")
    base = edge.base_url if upstream["kind"] == "openai" else edge.url
    configured = {"name": "up", "match": ["*"], "base_url": base, **upstream}
    settings = proxy_settings(edge.base_url, upstreams=[configured])
    headers = {"authorization": f"Bearer {KEY}", "x-api-key": KEY, "x-goog-api-key": KEY}
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers=headers)
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/json")
    said = _said(protocol, r.content)
    assert said.startswith("404 page not found") and "base_url" in said and hint in said


async def test_an_apis_own_404_is_relayed_as_it_came(tmp_path: Path, edge: EdgeUpstream) -> None:
    """OpenAI's "model does not exist" is its own JSON error: kept byte for byte, no hint."""
    own = b'{"error":{"message":"The model `x` does not exist","type":"invalid_request_error",' \
          b'"param":null,"code":"model_not_found"}}'  # fmt: skip
    edge.reply = Reply(404, [("content-type", "application/json")], own)
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json={"model": "x", "messages": ASK},
                         headers={"authorization": f"Bearer {KEY}"})  # fmt: skip
    assert r.status_code == 404 and r.content == own


async def test_a_gateways_error_page_is_said_in_openais_shape(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    """An nginx 502 page in front of an OpenAI-compatible server: the OpenAI SDK reads
    ``error.message``, which was missing. JSON in any other shape goes as it came (Gemini's
    list, a server's top-level ``code`` the overflow rescue reads, FastAPI's ``detail``)."""
    answers = [
        (502, b"<html>Bad Gateway</html>"),
        (400, b'[{"error": {"code": 400, "message": "Invalid JSON"}}]'),
        (400, b'{"code": "context_length_exceeded", "message": "too long"}'),
        (422, b'{"detail": [{"loc": ["body"], "msg": "field required"}]}'),
    ]
    for status, answer in answers:
        edge.reply = Reply(status, [], answer)
        async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as c:
            r = await c.post("/v1/chat/completions", json={"model": "x", "messages": ASK},
                             headers={"authorization": f"Bearer {KEY}"})  # fmt: skip
        if answer.startswith(b"<"):
            assert r.json()["error"]["message"] == answer.decode(), r.text
        else:
            assert r.content == answer, r.text
