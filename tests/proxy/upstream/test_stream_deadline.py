"""A streamed answer lasts ``limits.stream_max_s`` at most: an upstream dripping keep-alives
(which no per-read timeout catches) is cut there, the client told with an error event in its
protocol's stream shape, the row completed with ``stream_max_exceeded``; 0 leaves it unbounded."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.errors import StreamTooLong
from proxy.providers import load_litellm
from proxy.server.stream_deadline import bounded
from proxy.settings import Settings, settings_from_mapping
from tests.conftest import in_process, log_rows
from tests.support.anthropic_upstream import message_events, response_events
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import request, user

# litellm must use httpx (as the other litellm tests have it); set before it is imported.
os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

MESSAGES = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
CHAT_EVENT = b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n'
KEEP_ALIVE = b": keep-alive\n\n"
DRIP_S = 0.1

# (path, request body, the upstream's first event, how the cut reads in the protocol's shape)
CASES: dict[str, tuple[str, dict[str, Any], bytes, bytes]] = {
    "chat": ("/v1/chat/completions", request(user("hi"), stream=True), CHAT_EVENT, b"data: {"),
    "messages": (
        "/v1/messages",
        {**MESSAGES, "stream": True},
        message_events()[0],
        b"event: error",
    ),
    "responses": (
        "/v1/responses",
        {"model": "gpt-5", "input": "hi", "stream": True},
        response_events()[0],
        b"event: error",
    ),
    "gemini": (
        "/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
        GEMINI,
        b'data: {"candidates": []}\n\n',
        b"data: {",
    ),
    # Google's JSON-array stream (no ``alt=sse``): its keep-alive is whitespace, its cut the
    # array's last element
    "gemini-array": (
        "/v1beta/models/gemini-x:streamGenerateContent",
        GEMINI,
        b'[{"candidates": []}',
        b"",
    ),
}


def settings(edge: EdgeUpstream, stream_max_s: float) -> Settings:
    return settings_from_mapping(
        {
            "upstreams": [
                {
                    "name": "claude",
                    "kind": "anthropic",
                    "match": ["claude-*"],
                    "base_url": edge.url,
                },
                {"name": "gem", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url},
                {"name": "openai", "match": ["*"], "base_url": edge.base_url},
            ],
            "pipeline": {"on_rule_error": "fail"},
            "limits": {"stream_max_s": stream_max_s},
        }
    )


def drip(first: bytes, seconds: float, array: bool = False) -> Reply:
    """``first``, then a keep-alive every ``DRIP_S`` for ``seconds``."""
    keep = b"\n" if array else KEEP_ALIVE
    kind = "application/json" if array else "text/event-stream"
    chunks = [first] + [keep] * int(seconds / DRIP_S)
    return Reply(headers=[("content-type", kind)], chunks=chunks, chunk_delay_s=DRIP_S)


@pytest.mark.parametrize("case", CASES)
async def test_a_dripping_stream_is_cut_at_the_bound(
    tmp_path: Path, edge: EdgeUpstream, case: str
) -> None:
    path, body, first, cut = CASES[case]
    array = case.endswith("array")
    edge.reply = drip(first, 20, array)
    async with in_process(settings(edge, 0.6), str(tmp_path / "db")) as c:
        started = time.monotonic()
        r = await c.post(path, json=body, headers={"authorization": "Bearer k"})
        took = time.monotonic() - started
        (row,) = await log_rows(c)
    assert 0.6 <= took < 3, took
    assert r.status_code == 200  # the head went before the cut
    assert r.content.startswith(first)
    if array:  # still one JSON array, the cut its last element
        error = orjson.loads(r.content)[-1]
    else:  # the last event
        end = r.content[r.content.rindex(cut) :]
        error = orjson.loads(end.split(b"data: ", 1)[1])
    assert "stream_max_s" in orjson.dumps(error).decode()
    assert row["error_type"] == "stream_max_exceeded"
    assert "stream_max_s" in row["error"]
    assert row["status"] == 200


async def test_a_whole_answer_dripped_slowly_is_cut_at_the_bound_too(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    """Not streamed: a gateway's whitespace while the model works, forever, no per-read timeout
    catches; answered 504 in the protocol's shape at the bound."""
    chunks = [b'{"id": "c1",'] + [b" "] * 200
    edge.reply = Reply(headers=[("content-type", "application/json")], chunks=chunks,
                       chunk_delay_s=DRIP_S)  # fmt: skip
    async with in_process(settings(edge, 0.6), str(tmp_path / "db")) as c:
        started = time.monotonic()
        r = await c.post("/v1/chat/completions", json=request(user("hi")),
                         headers={"authorization": "Bearer k"})  # fmt: skip
        took = time.monotonic() - started
        (row,) = await log_rows(c)
    assert 0.6 <= took < 3, took
    assert r.status_code == 504
    assert "stream_max_s" in r.json()["error"]["message"]
    assert row["error_type"] == "stream_max_exceeded" and row["status"] == 504


async def test_no_bound_with_0(tmp_path: Path, edge: EdgeUpstream) -> None:
    path, body, first, _ = CASES["chat"]
    edge.reply = drip(first, 1.0)
    edge.reply.chunks.append(b"data: [DONE]\n\n")
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers={"authorization": "Bearer k"})
        (row,) = await log_rows(c)
    assert r.content == first + KEEP_ALIVE * 10 + b"data: [DONE]\n\n"
    assert row["error_type"] is None


def test_the_default_bound_is_an_hour() -> None:
    assert settings_from_mapping({}).limits.stream_max_s == 3600


async def test_a_dripping_stream_through_litellm_is_cut_too(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    """Messages bridged to an OpenAI upstream: the bound holds on litellm's stream as well."""
    load_litellm()  # its import takes seconds: not the stream's time
    edge.reply = drip(CHAT_EVENT, 20)
    body = {**MESSAGES, "model": "gpt-4o", "stream": True}
    async with in_process(settings(edge, 0.6), str(tmp_path / "db")) as c:
        started = time.monotonic()
        r = await c.post("/v1/messages", json=body, headers={"authorization": "Bearer k"})
        took = time.monotonic() - started
        (row,) = await log_rows(c)
    assert 0.6 <= took < 3, took
    assert b"event: error" in r.content and b"stream_max_s" in r.content
    assert row["error_type"] == "stream_max_exceeded"


async def _forever() -> AsyncIterator[bytes]:
    while True:
        await asyncio.sleep(0.05)
        yield KEEP_ALIVE


async def test_a_cancel_of_the_task_is_never_taken_for_the_bound() -> None:
    """The client gone (the task cancelled) while a read waits: a cancel, as before."""

    async def read() -> None:
        async for _ in bounded(_forever(), 0.3):
            pass

    task = asyncio.create_task(read())
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_bound_passing_during_a_send_ends_the_stream_at_the_next_read() -> None:
    got = []
    with pytest.raises(StreamTooLong):
        async for chunk in bounded(_forever(), 0.2):
            got.append(chunk)
            await asyncio.sleep(0.3)  # a slow send: not cut itself
    assert got == [KEEP_ALIVE]


PARTIAL = {  # the start of an event the upstream broke off in
    "chat": b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"hal',
    "messages": b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"te',
    "responses": b'event: response.output_text.delta\ndata: {"type":"response.output_text.de',
    "gemini": b'data: {"candidates":[{"content":{"parts":[{"text":"hal',
}


def sse_events(body: bytes) -> list[tuple[bytes | None, bytes]]:
    """(name, data) of each event, as a client's SSE parser reads them."""
    out: list[tuple[bytes | None, bytes]] = []
    name, data = None, []
    for line in body.replace(b"\r\n", b"\n").split(b"\n"):
        if not line:
            if data:
                out.append((name, b"\n".join(data)))
            name, data = None, []
        elif line.startswith(b"event:"):
            name = line[6:].strip()
        elif line.startswith(b"data:"):
            data.append(line[5:].lstrip(b" "))
    return out


@pytest.mark.parametrize("case", PARTIAL)
async def test_a_break_inside_an_event_leaves_the_error_event_readable(
    tmp_path: Path, edge: EdgeUpstream, case: str
) -> None:
    """The half-sent event is not relayed: every event the client reads is JSON, the last the
    proxy's error (glued onto the half-sent line, a client read neither)."""
    path, body, first, _ = CASES[case]
    chunks = [first + PARTIAL[case], b'"}}]}\n\n']
    edge.reply = Reply(
        headers=[("content-type", "text/event-stream")], chunks=chunks, after_first_chunk="break"
    )
    async with in_process(settings(edge, 30), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers={"authorization": "Bearer k"})
        (row,) = await log_rows(c)
    events = sse_events(r.content)
    assert r.content.startswith(first) and len(events) >= 2
    for _, data in events:
        orjson.loads(data)  # each one JSON
    assert b"broke off" in events[-1][1] and b"hal" not in r.content
    assert row["error_type"] == "upstream_connection_error"
