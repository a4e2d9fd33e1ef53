"""HTTP/1.1 pipelining: requests sent back to back on one connection are answered in order, and
a client cannot queue them without bound. Each pipelined request's arrival went over every
request not yet answered, and each answer resumed reading: 20,000 requests behind a slow one held
the event loop for over 30 s, 99,000 for minutes, memory climbing. One read of back-to-back
requests was parsed whole (7,000 requests queued by one call, 0.5 s of the loop). A client that
pipelines and hangs up leaves no traceback."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from pathlib import Path

import httpx
import orjson
import pytest

from tests.conftest import proxy_settings
from tests.proxy.server.test_slow_headers import raw_request
from tests.support.fake_upstream import FakeUpstream
from tests.support.live import stop
from tests.support.served import serve_like_cli

HEALTH = b"GET /healthz HTTP/1.1\r\nHost: p\r\n\r\n"


@pytest.mark.parametrize("count", [20, 3000])  # a short pipeline, and one of many reads
def test_pipelined_requests_are_answered_in_order(
    fake_upstream: FakeUpstream, tmp_path: Path, count: int
) -> None:
    server, url = serve_like_cli(proxy_settings(fake_upstream.base_url), str(tmp_path / "db"))
    try:
        last = b"GET /nope HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"
        out = raw_request(url, HEALTH * count + last, wait=60)
        statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", out)
        assert statuses == [b"200"] * count + [b"404"]
    finally:
        stop(server)


def test_a_flood_of_pipelined_requests_leaves_others_served(
    fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    server, url = serve_like_cli(proxy_settings(fake_upstream.base_url), str(tmp_path / "db"))
    host, port = url.removeprefix("http://").split(":")
    flood = socket.create_connection((host, int(port)))
    try:
        sender = threading.Thread(target=lambda: _send(flood, HEALTH * 40_000), daemon=True)
        sender.start()
        time.sleep(0.3)
        waits = []
        with httpx.Client(timeout=30) as client:
            for _ in range(5):
                started = time.monotonic()
                assert client.get(url + "/healthz").status_code == 200
                waits.append(time.monotonic() - started)
                time.sleep(0.05)
        assert max(waits) < 1.0, waits  # several seconds before
    finally:
        flood.close()
        stop(server)


def test_pipelined_requests_with_bodies_reach_upstream_whole_and_in_order(
    fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    server, url = serve_like_cli(proxy_settings(fake_upstream.base_url), str(tmp_path / "db"))
    try:
        fake_upstream.reset()
        sent = []
        for i in range(12):  # bodies of 1 to 45 KB: parsed across slices and reads
            text = f"request {i} " + "x" * (i * 4000)
            message = {"role": "user", "content": text}
            body = orjson.dumps({"model": "gpt-4o", "messages": [message]})
            close = b"Connection: close\r\n" if i == 11 else b""
            head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: p\r\n"
            head += b"Content-Type: application/json\r\n" + close
            sent.append(head + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        out = raw_request(url, b"".join(sent), wait=60)
        assert re.findall(rb"HTTP/1\.1 (\d{3}) ", out) == [b"200"] * 12
        got = [r["messages"][-1]["content"] for r in fake_upstream.requests]
        assert got == [f"request {i} " + "x" * (i * 4000) for i in range(12)]
    finally:
        stop(server)


def test_what_a_pipelining_client_sends_ahead_is_held_within_a_read(
    fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    """Answering a request resumes reading: behind a full pipeline each answer added a read to
    the bytes held unparsed (32 MB within seconds of small POSTs)."""
    server, url = serve_like_cli(proxy_settings(fake_upstream.base_url), str(tmp_path / "db"))
    host, port = url.removeprefix("http://").split(":")
    body = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: p\r\nContent-Type: application/json\r\n"
    one = head + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
    flood = socket.create_connection((host, int(port)))
    try:
        threading.Thread(target=lambda: _send(flood, one * 100_000), daemon=True).start()
        threading.Thread(target=lambda: _drain(flood), daemon=True).start()
        held = [0]
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            for conn in list(server.server_state.connections):
                held.append(len(getattr(conn, "_held", None) or b""))
            time.sleep(0.02)
        assert 0 < max(held) <= 512 * 1024, max(held)
    finally:
        flood.close()
        stop(server)


def _drain(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while sock.recv(1 << 20):
            pass


def _send(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):  # closed by the test's end
        sock.sendall(data)
