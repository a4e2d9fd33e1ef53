"""An upstream (or a gateway before it) may compress its answer although the proxy asks for
``identity``: each protocol's path, whole answers and streams, comes back to the client decoded,
without ``content-encoding``, and the proxy reads its usage and redacts its errors as it would an
uncompressed one."""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.settings import Settings, settings_from_mapping
from proxy.upstream import transport
from rules.redact import REDACTED
from tests.conftest import in_process, log_rows
from tests.support.anthropic_upstream import (
    MESSAGE_USAGE,
    message_events,
    response_events,
    response_object,
)
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message, chat_completion, request, user
from tests.support.gemini_upstream import GEMINI_USAGE

# litellm must use httpx (as the other litellm tests have it); set before it is imported.
os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

MESSAGES = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
JSON = ("content-type", "application/json")
KEY = "corpgw7Hx2Qm9Rt4"
KEYS = {"authorization": "Bearer client"}
SSE = ("content-type", "text/event-stream")


@pytest.fixture(autouse=True)
def server_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UPSTREAM_KEY", KEY)


def settings(edge: EdgeUpstream) -> Settings:
    """Claude models natively to ``edge`` as Anthropic, Gemini's as Gemini, the rest as OpenAI;
    each with the server's key (which the redaction of errors knows)."""
    upstreams = [
        {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url},
        {"name": "gem", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url},
        {"name": "openai", "match": ["*"], "base_url": edge.base_url},
    ]
    return settings_from_mapping(
        {
            "upstreams": [{**u, "api_key_env": "UPSTREAM_KEY"} for u in upstreams],
            "pipeline": {"on_rule_error": "fail"},
        }
    )


def gemini_chunk(usage: dict[str, int]) -> dict[str, Any]:
    parts = [{"text": "ok"}]
    return {"candidates": [{"content": {"parts": parts, "role": "model"}}], "usageMetadata": usage}


def sse_of(*payloads: Any) -> bytes:
    return b"".join(b"data: " + orjson.dumps(p) + b"\n\n" for p in payloads)


# (path, request body, the upstream's answer, streamed, the row's prompt tokens)
CASES: dict[str, tuple[str, dict[str, Any], bytes, bool, int | None]] = {
    "chat": (
        "/v1/chat/completions",
        request(user("hi")),
        orjson.dumps(chat_completion()),
        False,
        3,
    ),
    "chat-stream": (
        "/v1/chat/completions",
        request(user("hi"), stream=True),
        sse_of({"id": "c1", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
        + b"data: [DONE]\n\n",
        True,
        3,
    ),
    "responses": (
        "/v1/responses",
        {"model": "gpt-5", "input": "hi"},
        orjson.dumps(response_object()),
        False,
        130,
    ),
    "responses-stream": (
        "/v1/responses",
        {"model": "gpt-5", "input": "hi", "stream": True},
        b"".join(response_events()),
        True,
        130,
    ),
    "messages": (
        "/v1/messages",
        MESSAGES,
        orjson.dumps(anthropic_message(usage=MESSAGE_USAGE)),
        False,
        130,
    ),
    "messages-stream": (
        "/v1/messages",
        {**MESSAGES, "stream": True},
        b"".join(message_events()),
        True,
        130,
    ),
    "count-tokens": ("/v1/messages/count_tokens", MESSAGES, b'{"input_tokens": 12}', False, None),
    "gemini": (
        "/v1beta/models/gemini-x:generateContent",
        GEMINI,
        orjson.dumps(gemini_chunk(GEMINI_USAGE)),
        False,
        40,
    ),
    "gemini-sse": (
        "/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
        GEMINI,
        sse_of(gemini_chunk({"promptTokenCount": 40}), gemini_chunk(GEMINI_USAGE)),
        True,
        40,
    ),
    "gemini-array": (
        "/v1beta/models/gemini-x:streamGenerateContent",
        GEMINI,
        orjson.dumps([gemini_chunk({"promptTokenCount": 40}), gemini_chunk(GEMINI_USAGE)]),
        True,
        40,
    ),
    # Messages to an OpenAI upstream: through litellm
    "bridged": (
        "/v1/messages",
        {**MESSAGES, "model": "gpt-4o"},
        orjson.dumps(chat_completion()),
        False,
        3,
    ),
    "gemini-count": (
        "/v1beta/models/gemini-x:countTokens",
        GEMINI,
        b'{"totalTokens": 12}',
        False,
        None,
    ),
}


def compressed(data: bytes, coding: str) -> bytes:
    if coding == "deflate":
        return zlib.compress(data)
    return gzip.compress(data)


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
@pytest.mark.parametrize("case", CASES)
async def test_compressed_answers_reach_the_client_decoded(
    tmp_path: Path, edge: EdgeUpstream, case: str, coding: str
) -> None:
    path, body, answer, streamed, prompt = CASES[case]
    packed = compressed(answer, coding)
    kind = SSE if streamed and not case.endswith("array") else JSON
    headers = [kind, ("content-encoding", coding)]
    if streamed:
        edge.reply = Reply(headers=headers, chunks=[packed[:7], packed[7:20], packed[20:]])
    else:
        edge.reply = Reply(headers=headers, body=packed)
    async with in_process(settings(edge), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers=KEYS)
        rows = await log_rows(c)
    assert r.status_code == 200, r.text
    assert "content-encoding" not in r.headers
    if case == "bridged":
        assert r.json()["content"][0]["text"] == "ok"
    elif not streamed:
        assert r.content.replace(b" ", b"") == answer.replace(b" ", b"")
    else:  # the events as sent (the proxy may frame or spell them its own way)
        assert b"usage" in r.content
    if prompt is not None:
        (row,) = rows
        assert row["prompt_tokens"] == prompt


async def test_compressed_errors_are_redacted(tmp_path: Path, edge: EdgeUpstream) -> None:
    """An error answer and a stream's error event, gzip-compressed, quoting the key sent."""
    error = orjson.dumps({"error": {"message": f"bad key {KEY}", "type": "auth"}})
    edge.reply = Reply(
        status=401, headers=[JSON, ("content-encoding", "gzip")], body=gzip.compress(error)
    )
    stream = gzip.compress(b"data: " + error + b"\n\n")
    async with in_process(settings(edge), str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json=request(user("hi")), headers=KEYS)
        assert (r.status_code, "content-encoding" in r.headers) == (401, False)
        assert KEY not in r.text and REDACTED in r.text
        edge.reply = Reply(headers=[SSE, ("content-encoding", "gzip")], chunks=[stream])
        body = request(user("hi"), stream=True)
        r = await c.post("/v1/chat/completions", json=body, headers=KEYS)
        rows = await log_rows(c)
    assert (r.status_code, "content-encoding" in r.headers) == (200, False)
    assert KEY not in r.text and REDACTED in r.text
    assert rows[0]["error_type"] == "upstream_stream_error"


async def test_a_compressed_answer_is_bounded_decoded(
    tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound on a whole answer counts decoded bytes: a small body inflating past it is
    refused, not read into memory whole."""
    monkeypatch.setattr(transport, "MAX_ANSWER_BYTES", 100_000)
    packed = gzip.compress(b" " * 1_000_000)
    assert len(packed) < 100_000
    edge.reply = Reply(headers=[JSON, ("content-encoding", "gzip")], body=packed)
    async with in_process(settings(edge), str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json=request(user("hi")), headers=KEYS)
    assert r.status_code == 502 and "larger than" in r.text


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_answer_in_a_coding_the_proxy_cannot_decode_is_a_clear_502(
    tmp_path: Path, edge: EdgeUpstream, streamed: bool
) -> None:
    headers = [SSE if streamed else JSON, ("content-encoding", "x-unknown")]
    edge.reply = Reply(headers=headers, body=b"\x0b\x02\x80{}\x03")
    async with in_process(settings(edge), str(tmp_path / "db")) as c:
        body = request(user("hi"), stream=streamed)
        r = await c.post("/v1/chat/completions", json=body, headers=KEYS)
    assert r.status_code == 502 and "cannot decode" in r.text


async def test_a_compressed_model_list_is_read(tmp_path: Path, edge: EdgeUpstream) -> None:
    """``/v1/models`` merges the upstream's list with the configured names: it must read it."""
    listed = orjson.dumps({"object": "list", "data": [{"id": "up-model", "object": "model"}]})
    edge.reply = Reply(headers=[JSON, ("content-encoding", "gzip")], body=gzip.compress(listed))
    async with in_process(settings(edge), str(tmp_path / "db")) as c:
        r = await c.get("/v1/models", headers=KEYS)
    assert r.status_code == 200 and "ctxproxy_unlisted" not in r.json()
    assert "up-model" in {m["id"] for m in r.json()["data"]}


# a client of each protocol reaching a model through litellm (another protocol's upstream)
BRIDGED = {
    "chat to anthropic": ("/v1/chat/completions", request(user("hi"), model="claude-x")),
    "messages to openai": ("/v1/messages", {**MESSAGES, "model": "gpt-4o"}),
    "responses to anthropic": ("/v1/responses", {"model": "claude-x", "input": "hi"}),
    "chat to gemini": ("/v1/chat/completions", request(user("hi"), model="gemini-x")),
}


CODINGS = {
    "long": "x-" + "z" * 3000 + f" {KEY} sk-ant-api03-{'Q' * 80}",
    "the server's key": KEY,  # lowered, it escaped the key's redaction
}


@pytest.mark.parametrize("coding", CODINGS)
@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("case", BRIDGED)
async def test_a_coding_not_read_is_not_echoed_whole(
    tmp_path: Path, edge: EdgeUpstream, case: str, streamed: bool, coding: str
) -> None:
    """The upstream's ``content-encoding`` is its to write: the client is not sent it whole,
    nor a secret in it."""
    coding = CODINGS[coding]
    headers = [SSE if streamed else JSON, ("content-encoding", coding)]
    edge.reply = Reply(headers=headers, body=b"{}")
    path, body = BRIDGED[case]
    async with in_process(settings(edge), str(tmp_path / "db")) as c:
        r = await c.post(path, json={**body, "stream": streamed}, headers=KEYS)
        (row,) = await log_rows(c)
    assert r.status_code == 502, r.text
    assert len(r.content) < 1000 and "zzzzzzzzzz" * 20 not in r.text, r.text
    assert KEY.lower() not in r.text.lower() and "QQQQQQQQ" not in r.text
    assert KEY.lower() not in (row["error"] or "").lower() and len(row["error"] or "") < 1000
