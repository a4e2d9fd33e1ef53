"""A SQLite log whose disk fills up (SQLITE_FULL: "database or disk is full") while the proxy
serves: its writes wait, queued within ``store.buffer_rows``, and are written once there is room
again; they were taken for rows the file refused and lost at once (request rows, cache reports,
the response ids a restarted proxy needs to continue a conversation)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import aiosqlite

from proxy.store.sqlite import SQLiteStore
from rules.base import SessionState


async def room(db: aiosqlite.Connection, pages: int | None) -> None:
    """Leave the file no room past its pages now (``pages`` None), or that many pages."""
    if pages is None:
        async with db.execute("PRAGMA page_count") as cur:
            row = await cur.fetchone()
        pages = int(row[0]) if row else 0
    await db.execute(f"PRAGMA max_page_count = {pages}")


async def test_writes_wait_out_a_full_disk(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    store = SQLiteStore(str(path), batch_window_s=0.001)
    await store.open()
    try:
        await store.in_writer(lambda db: room(db, None))  # the disk is full from here
        for i in range(40):
            row = {"id": f"r{i}", "created_at": time.time(), "error": "x" * 4000}
            await store.insert_request(row)
        async with store.session("alice/s") as held:
            await held.save(SessionState({"n": 1}), None)
        await asyncio.sleep(2.0)  # past the writer's tries of a refused batch
        assert store.write_errors == 0
        await store.writer.execute("PRAGMA max_page_count = 1000000")  # space freed
        await asyncio.wait_for(store.flush(), 10.0)
        assert store.write_errors == 0
    finally:
        await store.close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT count(*) FROM requests").fetchone()[0] == 40
        assert db.execute("SELECT state FROM sessions WHERE id = 'alice/s'").fetchone() is not None
    finally:
        db.close()


async def test_the_retention_frees_room_while_writes_wait_on_a_full_disk(tmp_path: Path) -> None:
    """The file is full of old rows: the retention's deletes, which give the new rows their
    room, ran in the writer after the batch it kept trying, so never, and the writes waited for
    ever (the prune with them)."""
    path = tmp_path / "log.db"
    store = SQLiteStore(str(path), batch_window_s=0.001)
    await store.open()
    try:
        for i in range(40):  # old rows
            await store.insert_request({"id": f"old{i}", "created_at": 1.0, "error": "x" * 4000})
        await store.flush()
        await store.in_writer(lambda db: room(db, None))  # the disk is full from here
        for i in range(40):
            row = {"id": f"r{i}", "created_at": time.time(), "error": "x" * 4000}
            await store.insert_request(row)
        await asyncio.sleep(0.3)  # the writer is trying the refused batch
        deleted = await asyncio.wait_for(store.prune(older_than=10.0, idle_before=0.0), 5.0)
        assert deleted["requests"] == 40
        await asyncio.wait_for(store.flush(), 10.0)
        assert store.write_errors == 0
    finally:
        await store.close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT count(*) FROM requests").fetchone()[0] == 40
    finally:
        db.close()
