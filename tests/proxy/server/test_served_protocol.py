"""What ``ctxproxy serve``'s uvicorn protocol adds to each request: the response head written with
the first body bytes (``head_hold``), and the request told when its connection is lost
(``DisconnectSignal``) instead of a task waiting on ``receive``. Unit tests on a fake transport,
then the proxy served as the CLI serves it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from uvicorn.server import ServerState

from proxy.server.disconnect_watch import (
    DisconnectSignal,
    DisconnectWatch,
    disconnect_signal,
)
from proxy.server.head_hold import JOINED_MAX, HeadHold
from proxy.server.protocol import server_config
from proxy.settings import ServerSettings
from tests.conftest import LiveProxy, proxy_settings
from tests.support.factories import request, user
from tests.support.fake_upstream import FakeUpstream
from tests.support.live import stop
from tests.support.served import serve_like_cli

JSON = {"content-type": "application/json"}


class FakeTransport:
    """Records what is written; enough of ``asyncio.Transport`` for uvicorn's protocol."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8787), "peername": ("127.0.0.1", 50000)}.get(name)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


# ----- HeadHold on its own -----


async def test_the_head_goes_out_with_the_first_body_bytes() -> None:
    transport = FakeTransport()
    hold = HeadHold(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    hold.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    assert transport.writes == []
    hold.write(b"ok")
    assert transport.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"]
    hold.write(b"HTTP/1.1 200 looks like a head but is body")  # only the first write is held
    assert transport.writes[-1] == b"HTTP/1.1 200 looks like a head but is body"
    await asyncio.sleep(0)  # the scheduled flush finds nothing left
    assert len(transport.writes) == 2


async def test_a_body_of_any_bytes_like_type_joins_the_head() -> None:
    transport = FakeTransport()
    hold = HeadHold(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    hold.write(b"HTTP/1.1 200 OK\r\n\r\n")
    hold.write(memoryview(b"ok"))
    assert transport.writes == [b"HTTP/1.1 200 OK\r\n\r\nok"]


async def test_a_large_first_body_goes_after_the_head_not_copied_into_it() -> None:
    """Joining costs a copy of the body (a 60 MB answer: ~25 ms of the loop); past
    ``JOINED_MAX`` the head and the body are two writes, the same bytes in the same order."""
    transport = FakeTransport()
    hold = HeadHold(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    body = b"x" * (JOINED_MAX + 1)
    hold.write(b"HTTP/1.1 200 OK\r\n\r\n")
    hold.write(body)
    assert transport.writes == [b"HTTP/1.1 200 OK\r\n\r\n", body]


async def test_a_head_alone_is_flushed_on_the_next_turn_of_the_loop() -> None:
    """An event stream whose first event is not there yet: its head does not wait for it."""
    transport = FakeTransport()
    hold = HeadHold(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    hold.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    assert transport.writes == []
    await asyncio.sleep(0)
    assert transport.writes == [b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"]
    hold.write(b"5\r\nhello\r\n")
    assert transport.writes[-1] == b"5\r\nhello\r\n"


async def test_interim_answers_pass_and_close_flushes_the_head() -> None:
    transport = FakeTransport()
    hold = HeadHold(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    hold.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    hold.write(b"HTTP/1.1 500 Internal Server Error\r\n\r\n")
    hold.close()
    assert transport.writes[-1] == b"HTTP/1.1 500 Internal Server Error\r\n\r\n"
    assert transport.closed and hold.is_closing()  # the rest is the transport's own


async def test_a_held_head_is_dropped_once_the_connection_is_closing() -> None:
    transport = FakeTransport()
    hold = HeadHold(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    hold.write(b"HTTP/1.1 200 OK\r\n\r\n")
    transport.closed = True  # the client went away meanwhile
    await asyncio.sleep(0)
    assert transport.writes == []


# ----- DisconnectSignal on its own -----


def test_a_signal_calls_its_subscriber_once_and_a_late_one_at_once() -> None:
    signal, calls = DisconnectSignal(), []
    signal.subscribe(lambda: calls.append("first"))
    signal.fire()
    signal.fire()
    assert calls == ["first"] and signal.lost
    signal.subscribe(lambda: calls.append("late"))
    assert calls == ["first", "late"]
    quiet = DisconnectSignal()
    quiet.subscribe(lambda: calls.append("unsubscribed"))
    quiet.unsubscribe()
    quiet.fire()
    assert "unsubscribed" not in calls


async def test_the_watch_on_a_signal_cancels_the_request_and_swallows_its_own_cancel() -> None:
    signal = DisconnectSignal()
    started = asyncio.Event()

    async def receive() -> dict[str, Any]:
        raise AssertionError("with a signal, nothing reads receive")

    async def request_task() -> str:
        async with DisconnectWatch(receive, signal):
            started.set()
            await asyncio.sleep(3600)
        return "returned"

    task = asyncio.create_task(request_task())
    await started.wait()
    signal.fire()
    assert await asyncio.wait_for(task, 2) == "returned"


async def test_an_outer_cancel_still_stands_with_a_signal() -> None:
    signal = DisconnectSignal()

    async def receive() -> dict[str, Any]:
        raise AssertionError("unused")

    async def request_task() -> None:
        async with DisconnectWatch(receive, signal):
            await asyncio.sleep(3600)

    task = asyncio.create_task(request_task())
    await asyncio.sleep(0.01)
    task.cancel()  # e.g. the server shutting down
    signal.fire()  # and the client leaving at the same moment
    with pytest.raises(asyncio.CancelledError):
        await task


# ----- the protocol, fed by hand -----


def _protocol(app: Any) -> tuple[Any, FakeTransport]:
    config = server_config(app, ServerSettings(), "127.0.0.1", 0, lifespan="off")
    config.load()
    protocol = config.http_protocol_class(  # type: ignore[call-arg]
        config=config, server_state=ServerState(), app_state={}
    )
    transport = FakeTransport()
    protocol.connection_made(transport)
    return protocol, transport


async def test_the_served_protocol_writes_a_whole_answer_at_once() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"2")]})  # fmt: skip
        await send({"type": "http.response.body", "body": b"ok"})

    protocol, transport = _protocol(app)
    protocol.data_received(b"GET /x HTTP/1.1\r\nHost: p\r\n\r\n")
    await asyncio.sleep(0.05)
    assert len(transport.writes) == 1
    head, body = transport.writes[0].split(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and body == b"ok"
    protocol.connection_lost(None)


async def test_each_request_gets_a_signal_that_fires_when_the_connection_is_lost() -> None:
    seen: list[DisconnectSignal | None] = []
    lost = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        signal = disconnect_signal(scope)
        seen.append(signal)
        if len(seen) == 1:
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        assert signal is not None
        signal.subscribe(lost.set)
        await lost.wait()

    protocol, _ = _protocol(app)
    protocol.data_received(b"GET /a HTTP/1.1\r\nHost: p\r\n\r\n")
    await asyncio.sleep(0.05)
    protocol.data_received(b"GET /b HTTP/1.1\r\nHost: p\r\n\r\n")
    await asyncio.sleep(0.05)
    first, second = seen
    assert isinstance(first, DisconnectSignal) and isinstance(second, DisconnectSignal)
    assert first is not second and not second.lost
    protocol.connection_lost(None)
    await asyncio.wait_for(lost.wait(), 2)
    assert second.lost and not first.lost  # the answered request's signal was let go


# ----- the proxy, served as the CLI serves it -----


@pytest.fixture
def cli_proxy(fake_upstream: FakeUpstream, tmp_path: Path) -> Iterator[LiveProxy]:
    db = str(tmp_path / "proxy.db")
    server, url = serve_like_cli(proxy_settings(fake_upstream.base_url), db)
    try:
        yield LiveProxy(url, db)
    finally:
        stop(server)


@pytest.fixture
def no_watch_task(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Records any use of the fallback watch (a task reading ``receive``)."""
    used: list[bool] = []
    fallback = DisconnectWatch._watch

    async def recorded(self: DisconnectWatch) -> None:
        used.append(True)
        await fallback(self)

    monkeypatch.setattr(DisconnectWatch, "_watch", recorded)
    return used


def test_answers_and_streams_are_relayed_whole(
    cli_proxy: LiveProxy, fake_upstream: FakeUpstream, no_watch_task: list[bool]
) -> None:
    fake_upstream.script.content = "a b c"
    with httpx.Client(timeout=10) as client:  # one kept-alive connection for both
        url = cli_proxy.base_url + "/chat/completions"
        r = client.post(url, content=orjson.dumps(request(user("hi"))), headers=JSON)
        assert r.status_code == 200
        assert r.json()["choices"][0]["message"]["content"] == "a b c"
        assert int(r.headers["content-length"]) == len(r.content)
        body = orjson.dumps(request(user("hi"), stream=True))
        with client.stream("POST", url, content=body, headers=JSON) as s:
            assert s.headers["content-type"].startswith("text/event-stream")
            text = b"".join(s.iter_raw())
        assert text.count(b"data: ") == 5 and text.endswith(b"data: [DONE]\n\n")
    row = cli_proxy.row(s.headers["x-ctxproxy-request-id"])
    assert row["status"] == 200 and row["client_disconnected"] == 0
    assert row["completion_tokens"] == 7  # the usage tap read the stream
    assert no_watch_task == []


def test_a_client_leaving_a_slow_upstream_is_noticed_at_once(
    cli_proxy: LiveProxy, fake_upstream: FakeUpstream, no_watch_task: list[bool]
) -> None:
    fake_upstream.script.delay_s = 4.0
    started = time.monotonic()
    with httpx.Client(timeout=0.5) as client, pytest.raises(httpx.ReadTimeout):
        body = orjson.dumps(request(user("go")))
        client.post(cli_proxy.base_url + "/chat/completions", content=body, headers=JSON)
    rows: list[dict[str, Any]] = []
    while time.monotonic() - started < 3.5 and not rows:
        rows = [r for r in cli_proxy.rows() if r["status"] is not None]
        time.sleep(0.05)
    assert rows, "the row was not completed before the upstream would have answered"
    (row,) = rows
    assert row["status"] == 499 and row["client_disconnected"] == 1
    assert no_watch_task == []


def test_a_client_leaving_mid_stream_ends_the_relay_at_once(
    cli_proxy: LiveProxy, fake_upstream: FakeUpstream, no_watch_task: list[bool]
) -> None:
    fake_upstream.script.content = "a b c d"
    fake_upstream.script.hold_after_first_chunk = True
    body = orjson.dumps(request(user("go"), stream=True))
    try:
        with (
            httpx.Client(timeout=10) as client,
            client.stream(
                "POST", cli_proxy.base_url + "/chat/completions", content=body, headers=JSON
            ) as r,
        ):
            request_id = r.headers["x-ctxproxy-request-id"]
            assert b'"a"' in next(r.iter_raw())
        row = cli_proxy.row(request_id, timeout=5)
        assert row["client_disconnected"] == 1 and row["status"] == 200
        assert not fake_upstream.release.is_set()  # ended while the upstream still held back
        assert no_watch_task == []
    finally:
        fake_upstream.release.set()
