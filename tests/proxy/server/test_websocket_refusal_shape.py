"""A websocket upgrade is refused with 426 in the protocol of its path, as every other refusal
is: Anthropic's error on /v1/messages, Gemini's on /v1beta/, OpenAI's elsewhere. Answered by
the server before the app sees it (``ctxproxy serve``'s protocol) and by the app when a front
dropped the handshake's Upgrade (on the model routes a websocket client asks: Gemini's are
routed apart)."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlparse

import orjson
import pytest

from tests.conftest import in_process, proxy_settings
from tests.support.fake_upstream import FakeUpstream
from tests.support.live import stop
from tests.support.served import serve_like_cli

HANDSHAKE = {"sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", "sec-websocket-version": "13"}
PATHS = {
    "/v1/responses": "openai",
    "/v1/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/v1beta/models/gemini-2.5-flash:streamGenerateContent": "gemini",
}


def _shape(body: dict[str, object]) -> str:
    error = body.get("error")
    if body.get("type") == "error" and isinstance(error, dict) and "type" in error:
        return "anthropic"
    if isinstance(error, dict) and "status" in error and isinstance(error.get("code"), int):
        return "gemini"
    if isinstance(error, dict) and error.get("code") == "websocket_unsupported":
        return "openai"
    return "unknown"


def _upgrade(url: str, path: str) -> tuple[bytes, dict[str, object]]:
    where = urlparse(url)
    with socket.create_connection((where.hostname or "", where.port or 80), timeout=5) as s:
        head = (
            f"GET {path} HTTP/1.1\r\nHost: p\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in HANDSHAKE.items())
            + "\r\n"
        )
        s.sendall(head.encode())
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    status_line, _, rest = out.partition(b"\r\n")
    return status_line, orjson.loads(rest.partition(b"\r\n\r\n")[2])


@pytest.mark.parametrize("path", sorted(PATHS))
def test_the_server_refuses_an_upgrade_in_the_paths_protocol(
    path: str, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    server, url = serve_like_cli(proxy_settings(fake_upstream.base_url), str(tmp_path / "db"))
    try:
        status, body = _upgrade(url, path)
    finally:
        stop(server)
    assert status.startswith(b"HTTP/1.1 426")
    assert _shape(body) == PATHS[path], body
    assert "websockets are not served here" in orjson.dumps(body).decode()


@pytest.mark.parametrize("path", sorted(p for p in PATHS if p.startswith("/v1/")))
async def test_a_stripped_handshake_is_refused_in_the_paths_protocol(
    path: str, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    async with in_process(proxy_settings(fake_upstream.base_url), str(tmp_path / "db")) as c:
        refused = await c.get(path, headers=HANDSHAKE)
    assert refused.status_code == 426
    assert _shape(refused.json()) == PATHS[path], refused.text
