"""The app served in a background thread exactly as ``ctxproxy serve`` configures uvicorn
(``proxy.server.protocol.server_config``: header limits, connection limit, proxy headers)."""

from __future__ import annotations

import threading
import time
from typing import Any

from proxy.app import create_app
from proxy.server.protocol import server_config
from proxy.settings import Settings
from tests.support.live import _Server, free_port


def serve_like_cli(settings: Settings, db_path: str) -> tuple[_Server, str]:
    """A live server on a free loopback port; stop it with ``tests.support.live.stop``."""
    port = free_port()
    app = create_app(settings, db_path=db_path, strict=True)
    config: Any = server_config(app, settings.server, "127.0.0.1", port, lifespan="on")
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
