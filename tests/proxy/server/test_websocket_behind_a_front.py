"""A websocket handshake whose ``Upgrade`` and ``Connection`` a front dropped (nginx's
``proxy_set_header Connection ""``, the shipped deploy/nginx.conf) reaches the app as a plain
``GET /v1/responses``: answered 405, Codex retried its websocket five times (about 6 s a run)
before it fell back to HTTPS. The handshake's ``Sec-WebSocket-Key`` still arrives: such a GET
gets the 426 the server itself answers an upgrade with."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import in_process, proxy_settings
from tests.support.fake_upstream import FakeUpstream


async def test_a_handshake_stripped_of_its_upgrade_gets_426(
    fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    settings = proxy_settings(fake_upstream.base_url)
    handshake = {"sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", "sec-websocket-version": "13",
                 "openai-beta": "responses_websockets=2026-02-06"}  # fmt: skip
    async with in_process(settings, str(tmp_path / "db")) as c:
        refused = await c.get("/v1/responses", headers=handshake)
        plain = await c.get("/v1/responses")
    assert refused.status_code == 426
    assert refused.json()["error"]["code"] == "websocket_unsupported"
    assert plain.status_code == 405  # a GET that is no handshake: as before
