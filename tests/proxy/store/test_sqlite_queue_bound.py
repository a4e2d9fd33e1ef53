"""The SQLite writer's queue is bounded by ``store.buffer_rows``, as PostgreSQL's is: while the
database is locked for long the writes queued stop growing (memory with them); the writes past
the bound are dropped, counted and logged, and the ones queued are written."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from proxy.settings import StoreSettings
from proxy.store.dialect import SQLITE
from proxy.store.factory import create_store
from proxy.store.sqlite import SQLiteStore


async def test_writes_past_the_bound_are_dropped_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "log.db"
    store = SQLiteStore(str(path), buffer_rows=100)
    await store.open()
    try:
        with caplog.at_level(logging.ERROR, logger="ctxproxy.store"):
            for i in range(500):  # queued at once: the writer gets no turn in between
                store.write_later(SQLITE.feedback_upsert, (f"s{i}", 1.0, 10, 5, 0))
            assert store.backlog == 100
            await store.flush()
    finally:
        await store.close()
    assert store.write_errors == 400
    assert "dropping new ones" in caplog.text
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM session_cache").fetchone()[0] == 100


def test_the_setting_reaches_the_sqlite_store(tmp_path: Path) -> None:
    store = create_store(StoreSettings(buffer_rows=1234), str(tmp_path / "log.db"))
    assert isinstance(store, SQLiteStore) and store.buffer_rows == 1234
