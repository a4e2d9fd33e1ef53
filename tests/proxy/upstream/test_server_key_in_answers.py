"""The server's own upstream keys never reach a client, also in what an upstream answers with
success: a gateway's 200 carrying an error object that quotes the key (whole, or to a request
that asked for a stream), an event stream whose error has no ``data:`` line, an unnamed event of
plain text, a key split between two pieces of a stream. Every other byte passes as it came.

Against a socket-level loopback upstream (``tests/support/edge_upstream.py``), in
``auth.mode: keys`` with each upstream's key the server's (``api_key_env``)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.upstream.key_filter import stream_without_keys, without_keys
from rules.redact import REDACTED
from tests.conftest import in_process
from tests.proxy.upstream.test_error_redaction import (
    CHAT,
    CLIENT,
    CUSTOM_KEY,
    MESSAGES,
    OPENAI_KEY,
    RESPONSES,
    keys_settings,
    sent_key,
)
from tests.support.edge_upstream import EdgeUpstream, Reply

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"

GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
GEMINI_KEY = "AIzaSyServerOwnGeminiKey0123456789abcd"


def _settings(edge: EdgeUpstream) -> Any:
    settings = keys_settings(edge)
    gemini = {
        "name": "gemini",
        "kind": "gemini",
        "match": ["gemini-*"],
        "base_url": edge.url,
        "api_key_env": "GEMINI_SERVER_KEY",
    }
    data = settings.model_dump(mode="json")
    data["upstreams"].insert(0, gemini)
    return type(settings).model_validate(data)


# (path, body, the key its upstream is sent)
ENDPOINTS = {
    "chat": ("/v1/chat/completions", CHAT, OPENAI_KEY),
    "messages": ("/v1/messages", MESSAGES, CUSTOM_KEY),
    "responses": ("/v1/responses", RESPONSES, OPENAI_KEY),
    "gemini": ("/v1beta/models/gemini-2.5-flash:generateContent", GEMINI, GEMINI_KEY),
}


def _error_object(key: str) -> bytes:
    return orjson.dumps({"error": {"message": f"boom {key} refused", "type": "server_error"}})


@pytest.fixture
def edge(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The loopback upstream, and the server's keys in its environment."""
    monkeypatch.setenv("OPENAI_SERVER_KEY", OPENAI_KEY)
    monkeypatch.setenv("CLAUDE_SERVER_KEY", CUSTOM_KEY)
    monkeypatch.setenv("GEMINI_SERVER_KEY", GEMINI_KEY)
    monkeypatch.setenv("CTXPROXY_KEYS", CLIENT["authorization"][7:])
    server = EdgeUpstream().start()
    yield server
    server.stop()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("endpoint", ENDPOINTS)
async def test_a_200_error_object_quoting_the_server_key_is_relayed_without_it(
    tmp_path: Path, edge: EdgeUpstream, endpoint: str, stream: bool
) -> None:
    path, body, key = ENDPOINTS[endpoint]
    answer = _error_object(key)
    edge.reply = Reply(200, [("content-type", "application/json")], answer)
    sent = {**body, "stream": True} if stream and endpoint != "gemini" else body
    async with in_process(_settings(edge), str(tmp_path / "db")) as c:
        r = await c.post(path, json=sent, headers=CLIENT)
    assert sent_key(edge) == key or edge.last.header("x-goog-api-key") == key
    assert key not in r.text
    assert r.content == answer.replace(key.encode(), REDACTED.encode())  # the rest as it came
    assert int(r.headers["content-length"]) == len(r.content)


@pytest.mark.parametrize("endpoint", ["chat", "messages", "responses"])
async def test_an_event_stream_quoting_the_key_outside_its_error_events_is_relayed_without_it(
    tmp_path: Path, edge: EdgeUpstream, endpoint: str
) -> None:
    """A bare JSON error with no ``data:`` line, a plain-text event, and the key split between
    two pieces of the stream at every place it can be."""
    path, body, key = ENDPOINTS[endpoint]
    whole = (
        b'{"error":{"message":"bare ' + key.encode() + b'"}}\n\n'
        b"data: overloaded " + key.encode() + b" try later\n\n"
        b"data: split " + key.encode() + b" here\n\n"
    )
    cut = whole.rindex(key.encode())
    for at in range(cut + 1, cut + len(key)):
        edge.replies.append(
            Reply(headers=[("content-type", "text/event-stream")], chunks=[whole[:at], whole[at:]])
        )
    async with in_process(_settings(edge), str(tmp_path / "db")) as c:
        for _ in range(len(key) - 1):
            r = await c.post(path, json={**body, "stream": True}, headers=CLIENT)
            assert r.status_code == 200
            assert key not in r.text
            # each event as it came, but for the key (the relay may add its own end after)
            assert r.content.startswith(whole.replace(key.encode(), REDACTED.encode()))


def test_a_stream_holds_back_only_what_may_begin_a_key() -> None:
    keys_ = (b"sk-proj-abcdefghij",)

    async def pieces(*chunks: bytes) -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    async def relayed(*chunks: bytes) -> list[bytes]:
        return [p async for p in stream_without_keys(pieces(*chunks), keys_)]

    import asyncio

    # an event's closing newline holds nothing back: each piece goes on at once
    assert asyncio.run(relayed(b"data: a\n\n", b"data: b\n\n")) == [b"data: a\n\n", b"data: b\n\n"]
    # a piece ending in a key's start waits for the next one
    assert asyncio.run(relayed(b"x sk-pr", b"oj-abcdefghij y")) == [b"x ", b"[REDACTED] y"]
    # and comes out as it was when the next one does not finish the key
    assert asyncio.run(relayed(b"x sk-pr", b"ose")) == [b"x ", b"sk-prose"]
    assert asyncio.run(relayed(b"x sk-pr")) == [b"x ", b"sk-pr"]
    assert without_keys(b"a sk-proj-abcdefghij b", keys_) == b"a [REDACTED] b"
