"""The SQLite store's file, its WAL and shared-memory files and a folder made for it are its
owner's alone (0600, 0700), whatever the umask: they hold the server secret and every session's
state, which ``/ui`` keeps behind the admin key. An existing file others may read is said."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from proxy.store.sqlite import SQLiteStore


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_new_database_is_its_owners_alone(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        db = tmp_path / "made" / "here" / "ctxproxy.db"
        store = SQLiteStore(str(db))
        await store.open()
        try:
            files = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
            for path in files:
                assert path.exists() and _mode(path) == 0o600, (path, oct(_mode(path)))
            assert _mode(db.parent) == 0o700 and _mode(db.parent.parent) == 0o700
        finally:
            await store.close()
    finally:
        os.umask(old)


async def test_an_existing_shared_file_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "ctxproxy.db"
    db.touch(mode=0o644)
    os.chmod(db, 0o644)
    store = SQLiteStore(str(db))
    await store.open()
    await store.close()
    assert _mode(db) == 0o644  # left as its owner set it
    assert any("readable by other users" in r.getMessage() for r in caplog.records)
