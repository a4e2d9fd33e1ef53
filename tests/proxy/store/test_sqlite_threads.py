"""The SQLite store's connections each run on a worker thread that is not a daemon: one left
running keeps the process from exiting. A database that cannot be opened (not a database, say)
and a close whose writer was cancelled (a second Ctrl-C) leave none behind, so ``serve`` and the
log commands exit instead of hanging."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from proxy.store.sqlite import SQLiteStore


def _workers() -> set[threading.Thread]:
    return {
        t for t in threading.enumerate() if "_connection_worker_thread" in t.name and t.is_alive()
    }


async def _settled(before: set[threading.Thread]) -> set[threading.Thread]:
    for _ in range(200):  # the threads end once they have closed their connections
        left = _workers() - before
        if not left:
            return left
        await asyncio.sleep(0.01)
    return _workers() - before


async def test_a_file_that_is_no_database_fails_to_open_without_a_thread_left(
    tmp_path: Path,
) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not a database, just bytes " * 200)
    before = _workers()
    store = SQLiteStore(str(path))
    with pytest.raises(sqlite3.DatabaseError):
        await store.open()
    assert await _settled(before) == set()


async def test_a_close_after_the_writer_was_cancelled_leaves_no_thread(tmp_path: Path) -> None:
    before = _workers()
    store = SQLiteStore(str(tmp_path / "log.db"))
    await store.open()
    assert len(_workers() - before) == 3  # the writer's, the reader's and the views'
    task = store._writer_task
    assert task is not None
    task.cancel()  # what a second Ctrl-C does to the app's tasks
    with pytest.raises(asyncio.CancelledError):
        await store.close()
    assert await _settled(before) == set()
