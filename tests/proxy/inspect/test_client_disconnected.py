"""``client disconnected`` tells the truth: a streamed answer the client read to its last event is
not a disconnect, even when the client closes the connection before the upstream ends its stream
(Codex stops reading at ``response.completed``; the upstream's stream may end a moment later). A
client that leaves before the answer's last event still is one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from proxy.app import create_app
from proxy.settings import settings_from_mapping
from tests.conftest import LiveProxy
from tests.support.live import serve_in_thread, stop
from tests.support.protocol_upstreams import ResponsesUpstream, Turn, text
from tests.support.served import serve_like_cli

LINGER_S = 0.6  # the upstream ends its stream this long after the answer's last event
USAGE = {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}


def _sse(data: dict[str, Any], named: bool = True) -> bytes:
    head = b"event: " + data["type"].encode() + b"\n" if named else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


def _responses() -> list[bytes]:
    done = {"id": "resp_1", "object": "response", "status": "completed", "output": []}
    done["usage"] = USAGE
    return [
        _sse({"type": "response.created", "response": {**done, "status": "in_progress"}}),
        _sse({"type": "response.completed", "response": done}),
    ]


def _chat() -> list[bytes]:
    chunk = {"id": "c", "object": "chat.completion.chunk", "model": "gpt-4o"}
    delta = {"index": 0, "delta": {"content": "hi"}, "finish_reason": None}
    stop_ = {"index": 0, "delta": {}, "finish_reason": "stop"}
    return [
        b"data: " + orjson.dumps({**chunk, "choices": [delta]}) + b"\n\n",
        b"data: " + orjson.dumps({**chunk, "choices": [stop_]}) + b"\n\n",
        b"data: [DONE]\n\n",
    ]


def _anthropic() -> list[bytes]:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    message.update(model="claude-x", usage={"input_tokens": 5, "output_tokens": 0})
    block = {"type": "text", "text": ""}
    text = {"type": "text_delta", "text": "hi"}
    return [
        _sse({"type": "message_start", "message": message}),
        _sse({"type": "content_block_start", "index": 0, "content_block": block}),
        _sse({"type": "content_block_delta", "index": 0, "delta": text}),
        _sse({"type": "content_block_stop", "index": 0}),
        _sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": USAGE}),
        _sse({"type": "message_stop"}),
    ]


EVENTS: dict[str, Callable[[], list[bytes]]] = {
    "/v1/responses": _responses,
    "/v1/chat/completions": _chat,
    "/v1/messages": _anthropic,
}


def _lingering(events: list[bytes], pause: bool) -> StreamingResponse:
    async def stream() -> AsyncIterator[bytes]:
        for i, event in enumerate(events):
            yield event
            if pause and i == 0:  # the answer is under way: the model is thinking
                await asyncio.sleep(LINGER_S)
        await asyncio.sleep(LINGER_S)  # the answer is whole; the stream ends a moment later

    return StreamingResponse(stream(), media_type="text/event-stream")


async def _endpoint(request: Request) -> StreamingResponse:
    pause = b"pause" in await request.body()
    return _lingering(EVENTS[request.url.path](), pause)


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    app = Starlette(routes=[Route(path, _endpoint, methods=["POST"]) for path in EVENTS])
    server, url = serve_in_thread(app)
    yield url
    stop(server)


@pytest.fixture(params=["served_like_cli", "plain_uvicorn"])
def proxy(request: pytest.FixtureRequest, upstream: str, tmp_path: Path) -> Iterator[LiveProxy]:
    """The proxy as ``ctxproxy serve`` runs it (the protocol tells it of a lost connection), and
    under plain uvicorn (a task watches ``receive``)."""
    settings = settings_from_mapping(
        {
            "upstreams": [
                {"name": "a", "kind": "anthropic", "match": ["claude-*"], "base_url": upstream},
                {"name": "o", "kind": "openai", "match": ["*"], "base_url": upstream + "/v1"},
            ]
        }
    )
    db = str(tmp_path / "log.db")
    if request.param == "served_like_cli":
        server, url = serve_like_cli(settings, db)
    else:
        server, url = serve_in_thread(create_app(settings, db_path=db, strict=True))
    yield LiveProxy(url, db)
    stop(server)


REQUESTS = {
    "responses": ("/v1/responses", {"model": "gpt-5", "input": "hi", "stream": True}),
    "chat": (
        "/v1/chat/completions",
        {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True},
    ),
    "anthropic": (
        "/v1/messages",
        {
            "model": "claude-x",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
        },
    ),
}
LAST_EVENT = {"responses": "response.completed", "chat": "[DONE]", "anthropic": "message_stop"}
HEADERS = {"authorization": "Bearer sk-test-123456789", "x-api-key": "sk-test-123456789"}


def _stream_until(proxy: LiveProxy, protocol: str, stop_at: str, text: str = "hi") -> str:
    """Streams a request and closes the connection once a line holding ``stop_at`` arrived,
    without reading on to the end of the stream; the request id."""
    path, body = REQUESTS[protocol]
    body = orjson.loads(orjson.dumps(body).replace(b'"hi"', orjson.dumps(text)))
    with (
        httpx.Client(timeout=10) as client,
        client.stream("POST", proxy.url + path, json=body, headers=HEADERS) as r,
    ):
        assert r.status_code == 200
        for line in r.iter_lines():
            if stop_at in line:
                break
        else:
            raise AssertionError(f"the stream never carried {stop_at!r}")
        return r.headers["x-ctxproxy-request-id"]


@pytest.mark.parametrize("protocol", sorted(REQUESTS))
def test_a_client_closing_after_the_last_event_did_not_disconnect(
    proxy: LiveProxy, protocol: str
) -> None:
    request_id = _stream_until(proxy, protocol, LAST_EVENT[protocol])
    row = proxy.row(request_id, timeout=10)
    assert row["status"] == 200 and row["error_type"] is None
    assert row["client_disconnected"] == 0


@pytest.mark.parametrize("protocol", sorted(REQUESTS))
def test_a_client_leaving_before_the_last_event_disconnected(
    proxy: LiveProxy, protocol: str
) -> None:
    first = {"responses": "response.created", "chat": "data:", "anthropic": "message_start"}
    request_id = _stream_until(proxy, protocol, first[protocol], text="pause")
    row = proxy.row(request_id, timeout=10)
    assert row["status"] == 200 and row["client_disconnected"] == 1


def test_the_openai_sdk_reading_a_responses_stream_to_the_end(proxy: LiveProxy) -> None:
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test-123456789", max_retries=0)
    with client.responses.stream(model="gpt-5", input="hi") as stream:
        events = [event.type for event in stream]
    assert events[-1] == "response.completed"
    (logged,) = proxy.rows()
    row = proxy.row(logged["id"], timeout=10)
    assert row["status"] == 200 and row["client_disconnected"] == 0


@pytest.mark.parametrize(
    ("chunks", "ended"),
    [
        ([b'event: response.created\ndata: {"type":"response.created"}\n\n'], False),
        (
            [b'data: {"type":"response.created"}\n\n', b'data: {"type":"response.completed"}\n\n'],
            True,
        ),
        ([b'event: response.incomplete\r\ndata: {"type": "response.incomplete"}\r\n\r\n'], True),
        (
            [b'event: message_delta\ndata: {"type":"message_delta"}\n\nevent: message_st', b"op\n"],
            True,
        ),
        ([b'data: {"choices":[]}\n\nda', b"ta: [DONE]\n\n"], True),
        # the words in the model's text are not the event
        (
            [b'data: {"delta":"the \\"type\\":\\"message_stop\\" event and data: [DONE]"}\n\n'],
            False,
        ),
    ],
)
def test_answer_end_finds_the_last_event_across_chunks(chunks: list[bytes], ended: bool) -> None:
    from proxy.server.answer_end import AnswerEnd

    end = AnswerEnd()
    for chunk in chunks:
        end.feed(chunk)
    assert end.seen() is ended


@pytest.mark.parametrize("last", [b'data: {"type":"response.completed"}\n\n', b"x"])
def test_answer_end_keeps_a_bounded_window(last: bytes) -> None:
    """The last event found after it left the window (a ``response.completed`` echoing a long
    answer is larger than the window), the window's bytes bounded all along."""
    from proxy.server.answer_end import WINDOW, AnswerEnd

    end = AnswerEnd()
    end.feed(b'data: {"type":"response.created"}\n\n' + last)
    for _ in range(WINDOW // 1000 + 2):
        end.feed(b"x" * 1000)
        assert end._size <= WINDOW + 1000
    assert end.seen() is (last != b"x")


class LingeringResponses(ResponsesUpstream):
    """The scripted Responses upstream, ending each stream a moment after its last event."""

    async def _stream(self, response: dict[str, Any], turn: Turn) -> AsyncIterator[bytes]:
        async for chunk in super()._stream(response, turn):
            yield chunk
        await asyncio.sleep(LINGER_S)


def test_codex_reading_to_response_completed_did_not_disconnect(tmp_path: Path) -> None:
    """The real Codex (``codex exec``) stops reading at ``response.completed`` and closes the
    connection while the upstream's stream is still open: each of its requests was answered."""
    from tests.support.agent_clis import Codex, codex_binary
    from tests.support.agent_proxy import agent_settings

    codex_binary()  # skips, saying why, without the pinned Codex (bin/test installs it)
    upstream = LingeringResponses().start()
    upstream.default = Turn([text("Hello.")])
    try:
        settings = agent_settings("http://127.0.0.1:9", upstream.base_url)
        server, url = serve_like_cli(settings, str(tmp_path / "log.db"))
        try:
            proxy = LiveProxy(url, str(tmp_path / "log.db"))
            codex = Codex(proxy.base_url, tmp_path / "home", tmp_path / "work")
            (tmp_path / "work").mkdir(exist_ok=True)
            for turn in ("say hi", "say hi again"):
                run = codex.run(turn)
                assert run.returncode == 0, run.explain()
            rows = [proxy.row(r["id"], timeout=10) for r in proxy.rows()]
        finally:
            stop(server)
    finally:
        upstream.stop()
    assert len(rows) == 2
    assert any(row["latency_ms"] < LINGER_S * 1000 for row in rows)  # Codex left early
    for row in rows:
        assert row["status"] == 200 and row["client_disconnected"] == 0
