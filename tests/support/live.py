"""Run an ASGI app with uvicorn in a background thread on a free loopback port."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # threads cannot own signal handlers
        pass


def serve_in_thread(app: Any) -> tuple[_Server, str]:
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = _Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not server.started:
        if time.time() > deadline or not thread.is_alive():
            raise RuntimeError("server did not start")
        time.sleep(0.01)
    server.thread = thread  # type: ignore[attr-defined]
    return server, f"http://127.0.0.1:{port}"


def stop(server: _Server) -> None:
    server.should_exit = True
    server.thread.join(timeout=10)  # type: ignore[attr-defined]
