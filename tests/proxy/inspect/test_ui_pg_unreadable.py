"""The /ui pages over a PostgreSQL store that cannot be read (stopped, a table an operator locked,
a table gone): a 503 page that says so, as over a damaged SQLite file, not a 500 with a
traceback in the server's log (only SQLite's errors were caught). The outage's log line names
its cause (a timeout's text is empty: "unreachable ()")."""

from __future__ import annotations

import logging
from pathlib import Path

import asyncpg
import pytest

import proxy.store.postgres as pg_store
from tests.conftest import in_process, proxy_settings
from tests.support.postgres import PgServer

PAGES = ("/ui", "/ui/requests/req_x", "/ui/sessions/s_x")


def _settings(url: str) -> object:
    store = {"url": url, "lock_timeout_s": 0.3}
    return proxy_settings("http://127.0.0.1:9/v1", store=store, ui={"public": True})


@pytest.mark.parametrize("trouble", ["stopped", "locked", "dropped"])
async def test_a_page_says_the_log_cannot_be_read(
    own_server: PgServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    trouble: str,
) -> None:
    monkeypatch.setattr(pg_store, "STATEMENT_MARGIN_S", 0.3)  # a locked table's wait: 0.6 s
    url = own_server.database()
    locker = None
    try:
        async with in_process(_settings(url), url) as client:  # type: ignore[arg-type]
            assert (await client.get("/ui")).status_code == 200
            if trouble == "stopped":
                own_server.stop()
            else:
                locker = await asyncpg.connect(url)
                if trouble == "locked":
                    await locker.execute("BEGIN; LOCK TABLE requests IN ACCESS EXCLUSIVE MODE")
                else:
                    await locker.execute("DROP TABLE requests CASCADE")
            with caplog.at_level(logging.ERROR):
                for path in PAGES:
                    page = await client.get(path)
                    assert page.status_code == 503, (path, page.text[:300])
                    assert "The request log cannot be read" in page.text
            assert "Traceback" not in caplog.text and "Exception in ASGI" not in caplog.text
            assert "ui: the request log cannot be read (" in caplog.text
            if locker is not None:
                await locker.close()
                locker = None
    finally:
        if locker is not None:
            await locker.close()
        own_server.ensure_started()


def test_a_timeouts_log_line_names_it() -> None:
    from proxy.store.read_errors import described

    assert described(TimeoutError()) == "TimeoutError"
    assert described(OSError("refused")) == "OSError: refused"
