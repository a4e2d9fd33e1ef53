"""A client that goes away mid-stream still gets its log row completed."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import orjson
import pytest

from tests.conftest import LiveProxy, proxy_settings
from tests.support.factories import request, user
from tests.support.live import stop
from tests.support.served import serve_like_cli

JSON = {"content-type": "application/json"}


def test_client_disconnect_mid_stream_completes_the_row(live_proxy, fake_upstream) -> None:
    proxy = live_proxy()
    fake_upstream.script.content = "a b c d"
    fake_upstream.script.hold_after_first_chunk = True
    body = request(user("go"), stream=True)
    with (
        httpx.Client(timeout=10) as client,
        client.stream(
            "POST", proxy.base_url + "/chat/completions", content=orjson.dumps(body), headers=JSON
        ) as r,
    ):
        request_id = r.headers["x-ctxproxy-request-id"]
        first = next(r.iter_raw())
        assert b'"a"' in first
        # leaving the block closes the connection while the upstream still holds back
    fake_upstream.release.set()
    row = proxy.row(request_id, timeout=10)
    assert row["client_disconnected"] == 1
    assert row["status"] == 200
    assert row["ttfb_ms"] is not None


def test_disconnect_while_upstream_holds_the_stream_ends_the_relay_at_once(
    live_proxy, fake_upstream
) -> None:
    """The row completes while the upstream is still holding back: the proxy noticed the client
    leave and dropped the upstream stream, rather than waiting for its next chunk."""
    proxy = live_proxy()
    fake_upstream.script.content = "a b c d"
    fake_upstream.script.hold_after_first_chunk = True
    body = request(user("go"), stream=True)
    try:
        with (
            httpx.Client(timeout=10) as client,
            client.stream(
                "POST",
                proxy.base_url + "/chat/completions",
                content=orjson.dumps(body),
                headers=JSON,
            ) as r,
        ):
            request_id = r.headers["x-ctxproxy-request-id"]
            next(r.iter_raw())
        row = proxy.row(request_id, timeout=5)
        assert row["client_disconnected"] == 1
        assert not fake_upstream.release.is_set()
    finally:
        fake_upstream.release.set()


def test_disconnect_while_waiting_on_a_slow_upstream_is_logged_as_499_at_once(
    live_proxy, fake_upstream
) -> None:
    proxy = live_proxy()
    fake_upstream.script.delay_s = 4.0
    body = orjson.dumps(request(user("go")))
    started = time.monotonic()
    with httpx.Client(timeout=0.5) as client:
        try:
            client.post(proxy.base_url + "/chat/completions", content=body, headers=JSON)
        except httpx.ReadTimeout:
            pass  # the client gives up and closes its connection
        else:
            raise AssertionError("the slow upstream answered before the client gave up")
    rows: list[dict] = []
    while time.monotonic() - started < 3.5 and not rows:
        rows = [r for r in proxy.rows() if r["status"] is not None]
        time.sleep(0.05)
    assert rows, "the row was not completed before the upstream would have answered"
    (row,) = rows
    assert row["status"] == 499 and row["error_type"] == "client_disconnected"
    assert row["client_disconnected"] == 1


@pytest.mark.parametrize("size", [1_000, 300_000, 2_000_000], ids=["1 KB", "300 KB", "2 MB"])
def test_a_hang_up_is_seen_however_large_the_body(fake_upstream, tmp_path: Path, size: int) -> None:
    """Served as ``ctxproxy serve`` serves (its own protocol, which tells each request of its
    connection's loss): past 64 KiB of body held, uvicorn stops reading the socket until the app
    asks for more, and the proxy asks for nothing after the body. The body goes in one write, as
    an agent's does, and the client hangs up while the upstream is slow."""
    fake_upstream.script.delay_s = 5.0
    server, url = serve_like_cli(proxy_settings(fake_upstream.base_url), str(tmp_path / "db"))
    proxy = LiveProxy(url, str(tmp_path / "db"))
    try:
        body = orjson.dumps(request(user("w " * (size // 2))))
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as conn:
            head = (
                "POST /v1/chat/completions HTTP/1.1\r\nhost: proxy\r\n"
                f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
            )
            conn.sendall(head.encode() + body)
            time.sleep(1.0)  # the request is upstream by now
        hung_up = time.monotonic()
        rows: list[dict] = []
        while time.monotonic() - hung_up < 3.0 and not rows:
            rows = [r for r in proxy.rows() if r["status"] is not None]
            time.sleep(0.05)
        assert rows, "the hang-up was not seen before the upstream answered"
        assert rows[0]["status"] == 499 and rows[0]["client_disconnected"] == 1
    finally:
        stop(server)
