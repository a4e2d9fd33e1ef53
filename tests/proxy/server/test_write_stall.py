"""A client that takes none of its answer (a stream it stopped reading) is cut off after
``server.write_stall_timeout_s``: the send waiting on it had no bound (``limits.stream_max_s``
bounds the waits for the upstream only), so it held its request, an upstream connection and its
in-flight slot for as long as it kept the socket open, and with the pool's connections held so,
every other tenant's request queued until it timed out."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import orjson

from proxy.settings import settings_from_mapping
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import chat_completion
from tests.support.live import stop
from tests.support.served import serve_like_cli

EVENT = b"data: " + orjson.dumps({"choices": [{"delta": {"content": "x" * 16_000}}]}) + b"\n\n"


def test_a_client_that_stops_reading_lets_go_of_the_upstream(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    settings = settings_from_mapping(
        {
            "upstreams": [{"name": "edge", "match": ["*"], "base_url": edge.base_url}],
            "server": {"write_stall_timeout_s": 1.0},
            "limits": {"upstream_max_connections": 1},
        }
    )
    edge.replies = [Reply(headers=[("content-type", "text/event-stream")], chunks=[EVENT] * 4_000)]
    edge.reply = Reply.json(chat_completion("fine"))
    server, url = serve_like_cli(settings, str(tmp_path / "db"))
    host, port = url.removeprefix("http://").split(":")
    body = orjson.dumps(
        {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    )
    stuck = socket.create_connection((host, int(port)))
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        stuck.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: p\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        )
        assert stuck.recv(1024).startswith(b"HTTP/1.1 200")  # then reads nothing more
        time.sleep(0.5)
        started = time.monotonic()
        with httpx.Client(timeout=15) as client:
            other = client.post(
                url + "/v1/chat/completions",
                json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
            )
        assert other.status_code == 200, other.text
        assert time.monotonic() - started < 6  # the stall's second, then the upstream freed
    finally:
        stuck.close()
        stop(server)
