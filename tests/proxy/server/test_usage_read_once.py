"""An answer's usage is read for the prompt cache once a request: the session's feedback, the
log row's cached tokens and the cache line all take the one reading."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from proxy.server import feedback as feedback_mod
from proxy.server import handler as handler_mod
from proxy.server import stream_relay as stream_relay_mod
from proxy.server.stream_relay import relay_stream
from proxy.upstream import UpstreamResponse
from proxy.upstream import usage as usage_mod
from tests.proxy.telemetry.test_jsonlog import app_with_log, send
from tests.support.edge_upstream import EdgeUpstream, Reply, sse
from tests.support.factories import request, system, user

USAGE = {
    "prompt_tokens": 30,
    "completion_tokens": 2,
    "prompt_tokens_details": {"cached_tokens": 16},
}


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every ``cache_usage`` call, wherever the server makes it."""
    calls: list[Any] = []
    real = usage_mod.cache_usage

    def counted(usage: Any) -> Any:
        calls.append(usage)
        return real(usage)

    for module in (usage_mod, handler_mod, stream_relay_mod, feedback_mod):
        monkeypatch.setattr(module, "cache_usage", counted, raising=False)
    return calls


@pytest.mark.parametrize("stream", [False, True])
async def test_the_usage_is_read_once_and_feeds_all_three(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    upstream = EdgeUpstream().start()
    try:
        if stream:
            chunk = {"id": "c1", "object": "chat.completion.chunk", "choices": []}
            upstream.reply = Reply.event_stream(b"".join(sse(chunk, {**chunk, "usage": USAGE})))
        else:
            upstream.reply = Reply.json(
                {"id": "c1", "object": "chat.completion", "choices": [], "usage": USAGE}
            )
        calls = _counting(monkeypatch)
        async with app_with_log(tmp_path, upstream) as (client, log):
            body = request(system(), user("hello"))
            if stream:
                body = {**body, "stream": True}
            answer = await send(client, body)
            assert answer.status_code == 200
            store = client.app.state.services.store  # type: ignore[attr-defined]
            await store.flush()
            row = await store.get_request(answer.headers["x-ctxproxy-request-id"])
            _, feedback = store.cache_feedback.peek(row["session_id"])
    finally:
        upstream.stop()
    assert len(calls) == 1 and calls[0] == USAGE
    assert feedback is not None and (feedback.prompt_tokens, feedback.cached_tokens) == (30, 16)
    assert row["cached_tokens"] == 16 and row["prompt_tokens"] == 30
    cache = row["cache"] if isinstance(row["cache"], dict) else orjson.loads(row["cache"])
    assert cache["outcome"]  # the cache line was settled with the usage
    (line,) = log.getvalue().splitlines()
    assert orjson.loads(line)["cached_tokens"] == 16


async def test_a_usage_repeated_in_each_chunk_is_read_and_noted_once_a_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gemini repeats its usage in every chunk: a reading equal to the last one is not read or
    noted again; one that changes is, and the last one is what the row's fields take."""
    later = {**USAGE, "prompt_tokens_details": {"cached_tokens": 24}}
    chunk = {"id": "c1", "object": "chat.completion.chunk", "choices": []}
    events = sse(*({**chunk, "usage": u} for u in (USAGE, USAGE, USAGE, later, later)))

    async def chunks() -> AsyncIterator[bytes]:
        for event in events:  # each its own chunk, as an upstream's reads may come
            yield event

    calls = _counting(monkeypatch)
    noted: list[Any] = []
    fields: list[Any] = []
    store = SimpleNamespace(cache_feedback=SimpleNamespace(put=lambda s, f: noted.append(f)))
    settings = SimpleNamespace(
        store=SimpleNamespace(capture_payloads=False), limits=SimpleNamespace(stream_max_s=60.0)
    )
    services = SimpleNamespace(store=store, settings=settings, engine=SimpleNamespace(ledger=None))

    async def finish(row: dict[str, Any], done: dict[str, Any]) -> None:
        fields.append(done)

    handler = SimpleNamespace(
        s=services, _fields=lambda *a, reported=None, **k: {"reported": reported}, _finish=finish
    )
    sent: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message.get("body", b""))

    response = UpstreamResponse(200, {"content-type": "text/event-stream"}, chunks=chunks())
    row = {"id": "r1", "session_id": "s1", "created_at": 1.0}
    watch = SimpleNamespace(stop=lambda: None, ours=lambda: False)
    await relay_stream(handler, send, response, row, 0.0, {}, watch)  # type: ignore[arg-type]
    assert b"".join(sent) == b"".join(events)
    assert calls == [USAGE, later]
    assert [f.cached_tokens for f in noted] == [16, 24]
    assert fields[0]["reported"].cached_tokens == 24
