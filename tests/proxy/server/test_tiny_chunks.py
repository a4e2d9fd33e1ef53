"""A request body sent in 1-byte chunks: each chunk was added to the body as it was parsed
(``bytes +=``, quadratic in a read's chunks) and a whole 256 KiB read parsed in one call, so one
such client held the event loop ~190 ms a read and four held it 0.8 s. The pieces are now joined
per slice and a read is parsed 64 KiB a turn of the loop: beside three such clients, in this
process, the health checks' p90 was 0.18-0.26 s, and is 0.07-0.09 s."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx
import orjson

from tests.conftest import proxy_settings
from tests.support.fake_upstream import FakeUpstream
from tests.support.live import stop
from tests.support.served import serve_like_cli


def _send_in_bytes(url: str, body: bytes, answers: list[bytes]) -> None:
    host, port = url.removeprefix("http://").split(":")
    wire = b"".join(b"1\r\n" + body[i : i + 1] + b"\r\n" for i in range(len(body)))
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: p\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + wire + b"0\r\n\r\n"
        )
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    answers.append(out)


def test_a_body_in_one_byte_chunks_leaves_others_served(
    fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    server, url = serve_like_cli(proxy_settings(fake_upstream.base_url), str(tmp_path / "db"))
    text = "c" * 1_500_000
    body = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": text}]})
    answers: list[bytes] = []
    try:
        senders = [
            threading.Thread(target=_send_in_bytes, args=(url, body, answers)) for _ in range(3)
        ]
        for t in senders:
            t.start()
        waits = []
        with httpx.Client(timeout=30) as client:
            while any(t.is_alive() for t in senders):
                started = time.monotonic()
                assert client.get(url + "/healthz").status_code == 200
                waits.append(time.monotonic() - started)
                time.sleep(0.01)
        assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 3
        assert fake_upstream.last["messages"][0]["content"] == text
        waits.sort()
        assert len(waits) >= 10 and waits[int(len(waits) * 0.9)] < 0.15, waits[-10:]
    finally:
        stop(server)
