"""The /ui pages are built on a worker thread, and the rows they read decoded there once there are
more than a few: a 1,000-turn session's page is some 110 ms of template rendering and 60 ms of
JSON, which on the event loop held every tenant's requests while an admin looked."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from proxy.inspect.ui import UI
from proxy.store import batch
from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import EdgeUpstream
from tests.support.factories import assistant, request, result, shell, user

TURNS = batch.DECODED_ON_LOOP + 8


async def test_pages_and_long_row_lists_are_made_off_the_loop(
    tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = threading.get_ident()
    rendered: list[tuple[str, bool]] = []
    decoded: list[bool] = []
    page, decode = UI._page, batch.decode_row

    def spied_page(self: UI, name: str, status: int = 200, **context: Any) -> Any:
        rendered.append((name, threading.get_ident() == loop_thread))
        return page(self, name, status, **context)

    def spied_decode(row: Any) -> dict[str, Any]:
        decoded.append(threading.get_ident() == loop_thread)
        return decode(row)

    monkeypatch.setattr(UI, "_page", spied_page)
    monkeypatch.setattr(batch, "decode_row", spied_decode)
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as c:
        messages = [user("start")]
        for i in range(TURNS):
            messages += [assistant(None, shell(f"c{i}", f"mkdir d{i}")), result(f"c{i}", "")]
            r = await c.post(
                "/v1/chat/completions",
                json=request(*messages),
                headers={"authorization": "Bearer k", "x-session-id": "long"},
            )
            assert r.status_code == 200
        await c.app.state.services.store.flush()  # type: ignore[attr-defined]
        index = await c.get("/ui")
        assert index.status_code == 200
        session = next(p for p in index.text.split('"') if p.startswith("/ui/sessions/"))
        request_page = next(p for p in index.text.split('"') if p.startswith("/ui/requests/"))
        decoded.clear()
        for path in ("/ui", session, request_page):
            assert (await c.get(path)).status_code == 200
    assert [name for name, _ in rendered] == ["index.html", "index.html", "session.html",
                                              "request.html"]  # fmt: skip
    assert not any(on_loop for _, on_loop in rendered)
    # the lists of more than DECODED_ON_LOOP rows off the loop; a single row on it
    assert decoded.count(False) >= 2 * TURNS
    assert decoded.count(True) <= batch.DECODED_ON_LOOP + 1
