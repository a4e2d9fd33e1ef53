"""An event stream the upstream ends before its answer's last event (a connection closed
mid-answer reads as the end of a body that had no length) is a break, not an answer: the client
is told with an error event in its protocol's stream shape, so it does not act on a cut tool
call, and the row says so. A whole stream, and one ending in the provider's own error event, go
as they came. An event the upstream ends its stream in without its blank line is dropped if the
answer is cut (the error event would be glued onto it), and sent, ended, if it ends the answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.providers import load_litellm
from proxy.server.event_aligned import MAX_HELD
from tests.conftest import in_process, log_rows
from tests.proxy.upstream.test_stream_deadline import settings
from tests.support.anthropic_upstream import (
    RESPONSE_USAGE,
    event,
    message_events,
    response_events,
    response_object,
    sse_reply,
)
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


def _unended(chunk: bytes, keep: int) -> bytes:
    """``chunk`` without its blank line: ``keep`` bytes of its line ends kept."""
    body = chunk.rstrip(b"\r\n")
    return chunk[: len(body) + keep]


@pytest.mark.parametrize("whole_data", [False, True])
@pytest.mark.parametrize("case", CASES)
async def test_a_stream_ended_mid_event_drops_a_cut_event_before_the_error(
    tmp_path: Path, edge: EdgeUpstream, case: str, whole_data: bool
) -> None:
    """The upstream ends its stream cleanly in the middle of an event that is not the answer's
    last. A cut event's start went on to the client, and the error event was glued onto it, so
    the client read neither: it is dropped. An event whose data is whole, without only its blank
    line, goes ended, and the error event follows it."""
    whole, cut, starts = CASES[case][2], CASES[case][3], CASES[case][4]
    if whole_data:  # its line ends are the stream's, or LF in a stream of one event
        chunks = [*cut[:-1], _unended(cut[-1], 0)]
        sent = b"".join(chunks) + (b"\n\n" if len(cut) == 1 else cut[-1][len(chunks[-1]) :])
    else:
        half = whole[len(cut)][: len(whole[len(cut)]) // 2]
        chunks, sent = [*cut, half], b"".join(cut)
    r, row = await _relayed(edge, tmp_path, case, chunks)
    assert r.content.startswith(sent)
    error = r.content[len(sent) :]
    assert error.startswith(starts), error[:80]
    assert "last event" in orjson.dumps(orjson.loads(error.split(b"data: ", 1)[1])).decode()
    assert row["error_type"] == "upstream_connection_error"


@pytest.mark.parametrize("keep", [0, 1])
@pytest.mark.parametrize("case", CASES)
async def test_a_last_event_without_its_blank_line_goes_ended(
    tmp_path: Path, edge: EdgeUpstream, case: str, keep: int
) -> None:
    """A whole answer whose last event lacks its blank line (or only the blank line) is whole:
    no error follows, and the event is ended in the stream's own line ends, as a client's
    parser needs to read it."""
    whole = CASES[case][2]
    r, row = await _relayed(edge, tmp_path, case, [*whole[:-1], _unended(whole[-1], keep)])
    assert r.content == b"".join(whole)
    assert row["error_type"] is None and row["error"] is None


async def test_gemini_usage_in_a_last_chunk_without_its_blank_line_is_read(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    *first, last = _gemini(True)
    usage = {"promptTokenCount": 11, "candidatesTokenCount": 2, "cachedContentTokenCount": 4}
    with_usage = last.replace(b"}\r\n", b',"usageMetadata":' + orjson.dumps(usage) + b"}\r\n")
    r, row = await _relayed(edge, tmp_path, "gemini", [*first, _unended(with_usage, 0)])
    assert r.content == b"".join([*first, with_usage])
    assert (row["prompt_tokens"], row["cached_tokens"]) == (11, 4)


@pytest.mark.parametrize("case", CASES)
async def test_a_whole_stream_goes_as_it_came(
    tmp_path: Path, edge: EdgeUpstream, case: str
) -> None:
    whole = CASES[case][2]
    r, row = await _relayed(edge, tmp_path, case, whole)
    assert r.content == b"".join(whole)
    assert row["error_type"] is None and row["error"] is None


@pytest.mark.parametrize("unended", [False, True])
async def test_the_providers_own_error_event_is_not_followed_by_ours(
    tmp_path: Path, edge: EdgeUpstream, unended: bool
) -> None:
    """Sent as it came; without its blank line (the stream ended there), ended."""
    overloaded = {"type": "overloaded_error", "message": "Overloaded"}
    chunks = [*message_events()[:3], event("error", error=overloaded)]
    sent = [*chunks[:-1], _unended(chunks[-1], 0)] if unended else chunks
    r, row = await _relayed(edge, tmp_path, "messages", sent)
    assert r.content == b"".join(chunks)
    assert "Overloaded" in row["error"]
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


@pytest.mark.parametrize("broken", [False, True])
async def test_an_event_too_long_to_hold_is_ended_before_the_error(
    tmp_path: Path, edge: EdgeUpstream, broken: bool
) -> None:
    """An event longer than ``MAX_HELD`` goes on as it comes: when the stream ends or breaks in
    it, the proxy ends it (a blank line) before its error event, which a client then reads."""
    huge = b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"' + b"x" * (MAX_HELD + 4096)
    edge.reply = sse_reply([huge, b"y" * 10])
    edge.reply.after_first_chunk = "break" if broken else None
    path, body = CASES["chat"][:2]
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers={"authorization": "Bearer k"})
        (row,) = await log_rows(c)
    start, error = r.content.rsplit(b"\n\ndata: ", 1)
    assert huge.startswith(start[: len(huge)]) and len(start) > MAX_HELD
    assert b"\n" not in start  # the event's own bytes, then the blank line
    assert orjson.loads(error)["error"]
    assert row["error_type"] == "upstream_connection_error"


@pytest.mark.parametrize(
    ("event", "whole"),
    [
        (b'data: {"a": 1}', True),
        (b'data:{"a": 1}', True),
        (b"data: [DONE]", True),
        (b'event: x\ndata: {"a":\ndata: 1}', True),
        (b'data: {"a": ', False),
        (b'datax: {"a": 1}', False),  # another field: no data at all
        (b'metadata: {"a": 1}', False),
        (b": ping", False),
    ],
)
def test_an_events_data_is_read_from_its_data_lines_only(event: bytes, whole: bool) -> None:
    from proxy.server.stream_relay import _data_whole

    assert _data_whole(event) is whole


@pytest.mark.parametrize(
    "label", ["text/plain", "text/plain; charset=utf-8", None, "Text/Event-Stream"]
)
@pytest.mark.parametrize("case", CASES)
async def test_a_stream_labelled_as_text_is_read_as_a_stream(
    tmp_path: Path, edge: EdgeUpstream, case: str, label: str | None
) -> None:
    """An upstream answering a request for a stream with its events labelled ``text/plain`` (or
    with no type): read whole and relayed as text, a stream cut before its last event went to
    the client as a whole answer, the row a success. Now relayed as the event stream it is: cut,
    it ends in the protocol's error event; whole, it goes as it came."""
    path, body, whole, cut, starts = CASES[case]
    for chunks, broken in ((cut, True), (whole, False)):
        edge.reply = sse_reply(chunks)
        edge.reply.headers = [] if label is None else [("content-type", label)]
        async with in_process(settings(edge, 0), str(tmp_path / f"db{broken}")) as c:
            r = await c.post(path, json=body, headers={"authorization": "Bearer k"})
            (row,) = await log_rows(c)
        assert r.status_code == 200
        assert r.headers["content-type"].lower().startswith("text/event-stream")
        sent = b"".join(chunks)
        assert r.content.startswith(sent)
        if broken:
            assert r.content[len(sent) :].startswith(starts)
            assert row["error_type"] == "upstream_connection_error"
        else:
            assert r.content == sent and row["error_type"] is None


async def test_a_json_answer_to_a_request_for_a_stream_goes_as_it_came(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    """A server that ignores ``stream`` and answers JSON: a whole answer, not a cut stream."""
    from tests.support.edge_upstream import Reply
    from tests.support.factories import chat_completion

    edge.reply = Reply.json(chat_completion("ok"))
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        r = await c.post(
            "/v1/chat/completions", json=request(user("hi"), stream=True),
            headers={"authorization": "Bearer k"},
        )  # fmt: skip
        (row,) = await log_rows(c)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert r.json()["choices"][0]["message"]["content"] == "ok" and row["error_type"] is None


async def test_a_last_event_too_long_to_hold_goes_ended_when_its_last_read_passed_it_on(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    """The answer's last event, longer than ``MAX_HELD`` and sent without its blank line, whose
    last read is the one that took it past ``MAX_HELD``: it went on as it came, and nothing was
    held at the end to be ended, so the client's parser never read ``response.completed`` (Codex
    retries such a stream) and the row had no usage. It is ended, in the stream's line ends."""
    *first, _ = response_events()
    size = len(event("response.completed", response=response_object("")))
    # its bytes but the blank line: MAX_HELD, held whole, then 10 that pass it on
    text = "x" * (MAX_HELD + 10 + 2 - size)
    last = event("response.completed", response=response_object(text))
    unended = last[:-2]
    assert len(unended) == MAX_HELD + 10
    cut = MAX_HELD
    edge.reply = sse_reply([*first, unended[:cut], unended[cut:]])
    edge.reply.chunk_delay_s = 0.1
    path, body = CASES["responses"][:2]
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers={"authorization": "Bearer k"})
        (row,) = await log_rows(c)
    assert r.content == b"".join([*first, last])
    assert row["error_type"] is None
    assert row["prompt_tokens"] == RESPONSE_USAGE["input_tokens"]
