"""A chat-completions request as an ASGI scope, for tests that drive the app with their own
``receive``/``send`` (a client that stalls, leaves, or a server that refuses to send)."""

from __future__ import annotations

from typing import Any


def chat_scope(app: Any, path: str = "/v1/chat/completions") -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "app": app,
    }
