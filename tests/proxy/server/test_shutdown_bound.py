"""SIGTERM bounds a stream that never ends: requests under way get ``server.shutdown_timeout_s``
(30 s by default) to finish; then they are cut and the process exits, the cut stream's log row
finished as cut by the shutdown (not in flight, not a client that left)."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from proxy.server.protocol import server_config
from proxy.settings import ServerSettings
from tests.support.live import free_port
from tests.support.serve_cli import serve, wait_listening

CHUNK = b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{}}]}\n\n'


class _Endless(BaseHTTPRequestHandler):
    """A chat completion streamed forever, an event every 50 ms, until the reader hangs up."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            while True:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endless() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endless)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_the_default_bound_is_thirty_seconds() -> None:
    config = server_config(object(), ServerSettings(), "127.0.0.1", 8787)
    assert config.timeout_graceful_shutdown == 30.0


def test_sigterm_cuts_an_endless_stream_after_the_bound(tmp_path: Path, endless: str) -> None:
    port, db = free_port(), tmp_path / "log.db"
    config = (
        "server:\n  shutdown_timeout_s: 1\n"
        f"upstreams: [{{name: endless, match: ['*'], base_url: '{endless}'}}]\n"
    )
    proc, lines = serve(tmp_path, port, db, config)
    try:
        wait_listening(proc, lines)
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        received = threading.Event()

        def stream() -> None:
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            try:
                with httpx.stream("POST", url, json=body, timeout=60) as r:
                    for _ in r.iter_bytes():
                        received.set()
            except httpx.HTTPError:
                pass  # cut by the shutdown

        threading.Thread(target=stream, daemon=True).start()
        assert received.wait(30)  # the stream flows
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        # uvicorn ends by the signal it was given once shut down, as an unhandled one would
        assert proc.wait(timeout=20) == -signal.SIGTERM
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert 1.0 <= took < 6.0, took  # the bound, then the lifespan's close
    assert any("timeout graceful shutdown exceeded" in line for line in lines)
    assert not any("Traceback" in line for line in lines), lines  # said once, not as a trace
    with sqlite3.connect(db) as log:  # the cut stream's row is finished, and says why
        (row,) = log.execute("SELECT status, error_type, client_disconnected FROM requests")
    assert row == (200, "shutting_down", 0)
