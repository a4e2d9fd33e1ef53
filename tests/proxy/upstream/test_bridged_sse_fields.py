"""An upstream's event stream read by litellm (a client bridged to another protocol's upstream)
may hold lines that carry no event: comments (``: keep-alive``, as gateways and SSE servers
write them), ``retry:`` and ``id:`` fields, a ``data:`` line with nothing in it. Every SSE reader
skips them. litellm's do not: its Gemini reader took a comment for the start of a JSON value
and waited for the rest until the stream ended (a 502, "could not be reached"), and the OpenAI
SDK it reads OpenAI's streams with parsed an event of no data as JSON (a 502 again). They are
now taken off before litellm reads the stream; the answer comes through whole. And a whole
answer to a request for a stream is told as one that could not be read, not as an upstream out
of reach."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import in_process, log_rows
from tests.proxy.upstream.test_bridge_stream_open import fresh_clients  # noqa: F401
from tests.proxy.upstream.test_stream_deadline import settings
from tests.support.anthropic_upstream import message_events, sse_reply
from tests.support.edge_upstream import EdgeUpstream, Reply

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

ASK = [{"role": "user", "content": "hi"}]
CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o"}


def _openai(text: str) -> list[bytes]:
    deltas = [{"role": "assistant", "content": ""}, {"content": text}]
    chunks = [{**CHUNK, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
              for d in deltas]  # fmt: skip
    chunks.append({**CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return [b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


def _gemini(text: str) -> list[bytes]:
    usage = {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}
    content = {"parts": [{"text": text}], "role": "model"}
    candidate = {"content": content, "finishReason": "STOP", "index": 0}
    chunk = {"candidates": [candidate], "usageMetadata": usage}
    return [b"data: " + orjson.dumps(chunk) + b"\r\n\r\n"]


# (client path, its body, the upstream's answer): a client of one protocol, a model of another
CASES: dict[str, tuple[str, dict[str, Any], Any]] = {
    "messages to openai": (
        "/v1/messages",
        {"model": "gpt-4o", "max_tokens": 64, "messages": ASK, "stream": True},
        _openai,
    ),
    "chat to anthropic": (
        "/v1/chat/completions",
        {"model": "claude-x", "messages": ASK, "stream": True},
        lambda text: message_events(text),
    ),
    "chat to gemini": (
        "/v1/chat/completions",
        {"model": "gemini-x", "messages": ASK, "stream": True},
        _gemini,
    ),
    "responses to gemini": (
        "/v1/responses",
        {"model": "gemini-x", "input": "hi", "stream": True},
        _gemini,
    ),
}
# lines no SSE reader makes an event of, before the first event and between two
EMPTY = {
    "comment": b": keep-alive\n\n",
    "comment crlf": b":\r\n\r\n",
    "retry": b"retry: 3000\n\n",
    "id": b"id: 7\n\n",
    "empty data": b"data: \n\n",
    # an event of no data is not dispatched (the SSE standard: its type is dropped with it)
    "event, empty data": b"event: ping\ndata:\n\n",
    "event, no data": b"event: ping\n\n",
    # a keep-alive event, whatever its data (no protocol's reader needs it; theirs parsed it)
    "ping, text data": b"event: ping\ndata: keepalive\n\n",
    "heartbeat, split data": b"event: heartbeat\ndata: {\ndata: }\n\n",
}


@pytest.mark.parametrize("lines", EMPTY)
@pytest.mark.parametrize("case", CASES)
async def test_lines_that_carry_no_event_are_skipped(
    tmp_path: Path, edge: EdgeUpstream, case: str, lines: str
) -> None:
    path, body, answer = CASES[case]
    events = answer("Bonjour")
    extra = EMPTY[lines]
    edge.reply = sse_reply([extra, *events[:1], extra, *events[1:]])
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers={"authorization": "Bearer k"})
        (row,) = await log_rows(c)
    assert r.status_code == 200, r.text
    assert b"Bonjour" in r.content and b"error" not in r.content, r.content
    assert row["error_type"] is None, row["error"]


def test_the_lines_come_whole_whatever_the_reads() -> None:
    stream = (
        b': hi\r\ndata: {"a": "id: 1"}\r\n\r\nretry: 9\nid\ndata:\t\n'
        b"event: x\ndata: [DONE]\n\ndata: last"
    )
    kept = b'data: {"a": "id: 1"}\r\n\r\nevent: x\ndata: [DONE]\n\ndata: last'
    assert_filtered_in_any_reads(stream, kept)


# a client of each protocol asking a stream of a model reached through litellm
STREAMS = {
    "messages to openai": CASES["messages to openai"][:2],
    "chat to anthropic": CASES["chat to anthropic"][:2],
    "responses to anthropic": (
        "/v1/responses",
        {"model": "claude-x", "input": "hi", "stream": True},
    ),
    "chat to gemini": CASES["chat to gemini"][:2],
    "gemini to openai": (
        "/v1beta/models/gpt-4o:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
}


@pytest.mark.parametrize("kind", ["application/json", "Application/JSON; charset=utf-8"])
@pytest.mark.parametrize("case", STREAMS)
async def test_a_whole_answer_to_a_stream_is_not_called_unreachable(
    tmp_path: Path, edge: EdgeUpstream, case: str, kind: str
) -> None:
    """The upstream was reached, and answered: a whole answer (JSON, a gateway's page) to a
    request for a stream is one the proxy could not read, not a connection that failed (the
    client and the log were told "could not be reached", an operator looked for a network
    fault)."""
    path, body = STREAMS[case]
    edge.reply = Reply(headers=[("content-type", kind)], body=b"<html>ok</html>")  # any case
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers={"authorization": "Bearer k"})
        (row,) = await log_rows(c)
    assert r.status_code == 502, r.text
    assert b"could not be read" in r.content and b"could not be reached" not in r.content
    assert row["error_type"] != "upstream_connection_error"


def test_an_events_type_is_said_with_its_data_only() -> None:
    stream = (
        b"event: ping\ndata:\n\nevent: ping\n\nevent: a\ndata: 1\n\n"
        b"data: 2\nevent: b\n\nevent: c\r\nevent: d\r\ndata: 3\r\n\r\nevent: e"
    )
    kept = b"\n\nevent: a\ndata: 1\n\ndata: 2\nevent: b\n\nevent: d\r\ndata: 3\r\n\r\n"
    assert_filtered_in_any_reads(stream, kept)


def assert_filtered_in_any_reads(stream: bytes, kept: bytes) -> None:
    """``SseLines`` gives ``kept`` of ``stream`` however the reads cut it."""
    from proxy.sse_lines import SseLines

    for size in (1, 2, 7, len(stream)):
        lines = SseLines()
        out = b"".join(lines.feed(stream[i : i + size]) for i in range(0, len(stream), size))
        assert out + lines.end() == kept, size


def test_a_keep_alive_event_is_left_out_whole() -> None:
    stream = (
        b"event: ping\ndata: keepalive\n\nevent: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\n"
        b"event: heartbeat\ndata: a\ndata: b\n\nevent: pings\ndata: 1\n\n"
        b"event: ping\nevent: a\ndata: 2\n\nevent: keep-alive\ndata: x"
    )
    kept = b"\n\r\n\nevent: pings\ndata: 1\n\nevent: a\ndata: 2\n\n"
    assert_filtered_in_any_reads(stream, kept)
