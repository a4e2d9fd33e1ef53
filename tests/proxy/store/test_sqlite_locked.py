"""A SQLite log another process holds locked (a backup, a ``sqlite3`` shell left in a
transaction) delays the writes, never loses them: the writer retries its batch until the lock
goes, the writes behind it queued (bounded by ``buffer_rows``). It gave up after four tries,
about 9 s, and the rows and session states of that batch were lost."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

import proxy.store.sqlite_locked as sqlite_locked
from proxy.store.sqlite import SQLiteStore
from rules.base import SessionState

HELD_S = 3.0  # longer than one try (the writer's busy_timeout of 2 s, and a pause)


def _hold_locked(path: Path, seconds: float, locked: threading.Event) -> None:
    db = sqlite3.connect(path, timeout=10)
    db.execute("BEGIN EXCLUSIVE")
    locked.set()
    time.sleep(seconds)
    db.rollback()
    db.close()


async def test_a_lock_longer_than_the_tries_delays_the_writes_and_loses_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_locked, "WRITE_ATTEMPTS", 1)  # give up after one try, as before
    path = tmp_path / "log.db"
    store = SQLiteStore(str(path), batch_window_s=0.001)
    await store.open()
    try:
        locked = threading.Event()
        holder = threading.Thread(target=_hold_locked, args=(path, HELD_S, locked))
        holder.start()
        await asyncio.to_thread(locked.wait, 5)
        for i in range(20):
            await store.insert_request({"id": f"r{i}", "created_at": float(i)})
            await store.finish_request(f"r{i}", {"status": 200})
        async with store.session("s") as held:
            await held.save(SessionState({"n": 1}), None)
        await asyncio.wait_for(store.flush(), HELD_S + 20)
        holder.join()
        assert store.write_errors == 0
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM requests WHERE status = 200").fetchone() == (20,)
    reopened = SQLiteStore(str(path))
    await reopened.open()
    try:
        assert (await reopened.load_state("s"))[0].get("n") == 1
    finally:
        await reopened.close()
