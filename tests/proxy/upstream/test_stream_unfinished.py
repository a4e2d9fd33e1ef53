"""An event stream the upstream ends before its answer's last event (a connection closed
mid-answer reads as the end of a body that had no length) is a break, not an answer: the client
is told with an error event in its protocol's stream shape, so it does not act on a cut tool
call, and the row says so. A whole stream, and one ending in the provider's own error event, go
as they came."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.providers import load_litellm
from tests.conftest import in_process, log_rows
from tests.proxy.upstream.test_stream_deadline import settings
from tests.support.anthropic_upstream import event, message_events, response_events, sse_reply
from tests.support.edge_upstream import EdgeUpstream
from tests.support.factories import request, user

MESSAGES = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def _chat(finish: str | None) -> list[bytes]:
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o"}
    out = [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]
    if finish is not None:
        out.append({"index": 0, "delta": {}, "finish_reason": finish})
    return [b"data: " + orjson.dumps({**chunk, "choices": [c]}) + b"\n\n" for c in out]


def _gemini(finish: bool) -> list[bytes]:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": "ok"}], "role": "model"}}
    chunks = [{"candidates": [candidate]}]
    if finish:
        chunks.append({"candidates": [{**candidate, "finishReason": "STOP"}]})
    return [b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks]


# (path, body, the whole stream, the stream cut before its last event, how the error event starts)
CASES: dict[str, tuple[str, dict[str, Any], list[bytes], list[bytes], bytes]] = {
    "chat": (
        "/v1/chat/completions",
        request(user("hi"), stream=True),
        [*_chat("stop"), b"data: [DONE]\n\n"],
        _chat(None),
        b"data: {",
    ),
    "chat, no [DONE]": (  # some compatible servers end on the finish reason
        "/v1/chat/completions",
        request(user("hi"), stream=True),
        _chat("tool_calls"),
        _chat(None),
        b"data: {",
    ),
    "messages": (
        "/v1/messages",
        {**MESSAGES, "stream": True},
        message_events(),
        message_events()[:-2],  # cut before message_delta and message_stop
        b"event: error",
    ),
    "responses": (
        "/v1/responses",
        {"model": "gpt-5", "input": "hi", "stream": True},
        response_events(),
        response_events()[:-1],
        b"event: error",
    ),
    "gemini": (
        "/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
        GEMINI,
        _gemini(True),
        _gemini(False),
        b"data: {",
    ),
}


async def _relayed(
    edge: EdgeUpstream, tmp_path: Path, case: str, chunks: list[bytes], drip: float = 0.0
) -> Any:
    path, body = CASES[case][:2]
    edge.reply = sse_reply(chunks)
    edge.reply.chunk_delay_s = drip
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers={"authorization": "Bearer k"})
        (row,) = await log_rows(c)
    return r, row


@pytest.mark.parametrize("case", CASES)
async def test_a_stream_cut_before_its_last_event_ends_in_an_error(
    tmp_path: Path, edge: EdgeUpstream, case: str
) -> None:
    cut, starts = CASES[case][3], CASES[case][4]
    r, row = await _relayed(edge, tmp_path, case, cut)
    assert r.status_code == 200  # the head went before the break
    sent = b"".join(cut)
    assert r.content.startswith(sent)
    error = r.content[len(sent) :]
    assert error.startswith(starts)
    assert "last event" in orjson.dumps(orjson.loads(error.split(b"data: ", 1)[1])).decode()
    assert row["error_type"] == "upstream_connection_error"
    assert "last event" in row["error"]
    assert row["client_disconnected"] == 0


@pytest.mark.parametrize("case", CASES)
async def test_a_whole_stream_goes_as_it_came(
    tmp_path: Path, edge: EdgeUpstream, case: str
) -> None:
    whole = CASES[case][2]
    r, row = await _relayed(edge, tmp_path, case, whole)
    assert r.content == b"".join(whole)
    assert row["error_type"] is None and row["error"] is None


async def test_the_providers_own_error_event_is_not_followed_by_ours(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    overloaded = {"type": "overloaded_error", "message": "Overloaded"}
    chunks = [*message_events()[:3], event("error", error=overloaded)]
    r, row = await _relayed(edge, tmp_path, "messages", chunks)
    assert r.content == b"".join(chunks)
    assert row["error_type"] == "upstream_stream_error"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/messages", {**MESSAGES, "model": "gpt-4o", "stream": True}),
        ("/v1/responses", {"model": "gpt-4o", "input": "hi", "stream": True}),
        ("/v1beta/models/gpt-4o:streamGenerateContent?alt=sse", GEMINI),
    ],
)
async def test_a_whole_stream_bridged_through_litellm_is_whole(
    tmp_path: Path, edge: EdgeUpstream, path: str, body: dict[str, Any]
) -> None:
    """litellm writes the client's protocol from an OpenAI upstream's stream: its last event is
    the protocol's own, so no error follows it."""
    load_litellm()
    edge.reply = sse_reply([*_chat("stop"), b"data: [DONE]\n\n"])
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers={"authorization": "Bearer k"})
        (row,) = await log_rows(c)
    assert r.status_code == 200
    assert b"event: error" not in r.content and b"last event" not in r.content
    assert row["error_type"] is None, row["error"]


@pytest.mark.parametrize("keepalive", [False, True])
@pytest.mark.parametrize("numbered", [True, False])
async def test_the_responses_error_event_follows_the_streams_numbering(
    tmp_path: Path, edge: EdgeUpstream, numbered: bool, keepalive: bool
) -> None:
    """Every Responses stream event carries a ``sequence_number``; the error event is the next,
    also after a keep-alive comment (the numbering was read from the last read alone: 0)."""
    cut = [
        orjson.loads(c.split(b"data: ", 1)[1]) for c in response_events('a "sequence_number":99')
    ][:-1]
    chunks = [
        b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(
            {**e, "sequence_number": n} if numbered else e
        ) + b"\n\n"
        for n, e in enumerate(cut)
    ]  # fmt: skip
    if keepalive:  # a read of its own (chunks dripped apart)
        chunks.append(b": keepalive\n\n")
    r, _ = await _relayed(edge, tmp_path, "responses", chunks, drip=0.05 if keepalive else 0.0)
    error = orjson.loads(r.content[len(b"".join(chunks)) :].split(b"data: ", 1)[1])
    assert error["type"] == "error"
    assert error["sequence_number"] == (len(cut) if numbered else 0)
