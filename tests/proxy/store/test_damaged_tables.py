"""A SQLite log whose session tables are gone or damaged: a session's state and cache feedback
read as empty, with an error logged, and the request is forwarded and answered. A lock is not
damage: it still fails the read (an empty state saved over a stored one would lose it)."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.store.dialect import POSTGRES, SQLITE
from proxy.store.sqlite import SQLiteStore
from rules.base import SessionState
from tests.conftest import in_process
from tests.support.edge_upstream import EdgeUpstream, protocol_settings

BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def _drop(path: Path, *tables: str) -> None:
    with sqlite3.connect(path) as db:
        for table in tables:
            db.execute(f"DROP TABLE {table}")


async def test_a_missing_table_reads_as_an_empty_state(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "log.db"
    store = SQLiteStore(str(path))
    await store.open()
    await store.close()
    _drop(path, "sessions", "session_cache")
    store = SQLiteStore(str(path))
    await store.open()
    try:
        with caplog.at_level(logging.ERROR, logger="ctxproxy.store"):
            assert await store.load_state("s1") == (SessionState(), None)
            assert await store.cache_feedback.get("s1") is None
    finally:
        await store.close()
    assert "session state cannot be read" in caplog.text
    assert "cache feedback cannot be read" in caplog.text


async def test_requests_go_on_over_a_damaged_log(edge: EdgeUpstream, tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    async with in_process(protocol_settings(edge), str(path)) as client:
        r = await client.post("/v1/chat/completions", content=orjson.dumps(BODY),
                              headers={"content-type": "application/json"})  # fmt: skip
        assert r.status_code == 200
    _drop(path, "sessions", "session_cache")
    async with in_process(protocol_settings(edge), str(path)) as client:
        for name in ("a", "b"):  # new sessions, each read from the database
            r = await client.post("/v1/chat/completions", content=orjson.dumps(BODY),
                                  headers={"content-type": "application/json",
                                           "x-session-id": name})  # fmt: skip
            assert r.status_code == 200, r.text
    assert len(edge.seen) == 3


@pytest.mark.parametrize(
    ("exc", "unreadable"),
    [
        (sqlite3.OperationalError("no such table: sessions"), True),
        (sqlite3.DatabaseError("database disk image is malformed"), True),
        (sqlite3.DatabaseError("file is not a database"), True),
        (sqlite3.OperationalError("database is locked"), False),
        (ValueError("x"), False),
    ],
)
def test_what_counts_as_unreadable(exc: Any, unreadable: bool) -> None:
    assert SQLITE.unreadable(exc) is unreadable
    assert POSTGRES.unreadable(exc) is False


async def test_a_missing_log_table_loses_the_rows_not_the_sessions(
    edge: EdgeUpstream, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "log.db"
    store = SQLiteStore(str(path))
    await store.open()
    await store.close()
    _drop(path, "requests")
    with caplog.at_level(logging.ERROR, logger="ctxproxy.store"):
        async with in_process(protocol_settings(edge), str(path)) as client:
            r = await client.post("/v1/chat/completions", content=orjson.dumps(BODY),
                                  headers={"content-type": "application/json",
                                           "x-session-id": "kept"})  # fmt: skip
            assert r.status_code == 200, r.text
            await client.app.state.services.store.flush()  # type: ignore[attr-defined]
            page = await client.get("/ui")  # the log's pages say so, not a 500
            assert page.status_code == 503 and "no such table: requests" in page.text
    assert "no such table: requests" in caplog.text
    assert "could not be written" not in caplog.text
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1
