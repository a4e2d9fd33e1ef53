"""A client that sends its headers and then stalls (or trickles) its body gets a 408 once
``limits.body_read_timeout_s`` has passed, and the request is logged."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.conftest import in_process, proxy_settings
from tests.support.asgi import chat_scope

UPSTREAM = "http://upstream.test/v1"


async def test_a_stalled_body_is_a_408_and_logged(tmp_path: Path) -> None:
    settings = proxy_settings(UPSTREAM, limits={"body_read_timeout_s": 0.3})
    async with in_process(settings, str(tmp_path / "db")) as client:
        app = client.app  # type: ignore[attr-defined]
        first = [{"type": "http.request", "body": b'{"model": "m", "mess', "more_body": True}]

        async def receive():
            if first:
                return first.pop()
            await asyncio.sleep(3600)  # the client never sends the rest

        sent: list[dict] = []

        async def send(message):
            sent.append(message)

        loop = asyncio.get_running_loop()
        started = loop.time()
        await app(chat_scope(app), receive, send)
        assert loop.time() - started < 2
        assert sent[0]["status"] == 408
        # the connection is closed after it: a trickling sender cannot keep it
        assert (b"connection", b"close") in sent[0]["headers"]
        assert b'"code":"request_timeout"' in sent[1]["body"]
        store = app.state.services.store
        await store.flush()
        (row,) = await store.list_requests()
        assert row["status"] == 408 and row["error_type"] == "request_timeout"


async def test_a_body_that_arrives_in_time_in_pieces_is_read(tmp_path: Path) -> None:
    settings = proxy_settings(UPSTREAM, limits={"body_read_timeout_s": 5})
    async with in_process(settings, str(tmp_path / "db")) as client:
        app = client.app  # type: ignore[attr-defined]
        pieces = [b'{"model": "m", ', b'"messages": [{"role": "user", ', b'"content": 5}]}']
        messages = [
            {"type": "http.request", "body": p, "more_body": i < len(pieces) - 1}
            for i, p in enumerate(pieces)
        ]

        async def receive():
            await asyncio.sleep(0.01)
            return messages.pop(0)

        sent: list[dict] = []

        async def send(message):
            sent.append(message)

        await app(chat_scope(app), receive, send)
        # the whole body was read and parsed: its content type is what is refused
        assert sent[0]["status"] == 400
        assert b"messages[0].content" in sent[1]["body"]


async def test_a_request_cancelled_before_forwarding_is_logged_as_a_shutdown(
    tmp_path: Path,
) -> None:
    """The server cancels requests when it stops; one still reading its body gets its row."""
    async with in_process(proxy_settings(UPSTREAM), str(tmp_path / "db")) as client:
        app = client.app  # type: ignore[attr-defined]
        first = [{"type": "http.request", "body": b'{"model": "m"', "more_body": True}]

        async def receive():
            if first:
                return first.pop()
            await asyncio.sleep(3600)

        async def send(message):
            pass

        task = asyncio.create_task(app(chat_scope(app), receive, send))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        store = app.state.services.store
        await store.flush()
        (row,) = await store.list_requests()
        assert row["status"] == 503 and row["error_type"] == "shutting_down"
        assert app.state.services.observers is not None
