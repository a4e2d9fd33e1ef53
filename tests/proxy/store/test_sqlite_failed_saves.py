"""A session's save whose batch the database did not take (a row refused, the file full or
damaged, a batch that raised) is not lost from memory: it stays readable, however many other
sessions the state cache took in since, until a later save of its session is written, so the
session's next request reads its newest state, not the older one the database still has. At most
as many failed saves are kept as the state cache holds entries (the oldest let go, as before)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from proxy.store.sqlite import SQLiteStore
from rules.base import SessionState

REFUSE = (
    "CREATE TRIGGER refuse BEFORE UPDATE ON sessions WHEN NEW.id = 'tenant-b/conv' "
    "BEGIN SELECT RAISE(ABORT, 'refused'); END"
)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    opened = SQLiteStore(str(tmp_path / "log.db"), state_cache_size=4, batch_window_s=0.001)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


async def evict(store: SQLiteStore) -> None:
    """The session's own tenant opens other sessions: the state cache lets ``conv`` go."""
    for i in range(20):
        await store.load_state(f"tenant-b/other{i}")
    assert "tenant-b/conv" not in store._states


async def test_a_save_whose_row_was_refused_is_read_after_eviction(store: SQLiteStore) -> None:
    await store.save_state("tenant-b/conv", SessionState({"turn": 1}), None)
    await store.flush()
    await store.writer.execute(REFUSE)
    await store.writer.commit()
    await store.save_state("tenant-b/conv", SessionState({"turn": 2}), None)
    await store.flush()
    assert store.write_errors == 1
    await evict(store)
    assert (await store.load_state("tenant-b/conv"))[0].get("turn") == 2
    await store.writer.execute("DROP TRIGGER refuse")
    await store.writer.commit()
    await store.save_state("tenant-b/conv", SessionState({"turn": 3}), None)  # written
    await store.flush()
    assert store._unwritten == {}
    await evict(store)
    assert (await store.load_state("tenant-b/conv"))[0].get("turn") == 3


async def test_a_save_of_a_batch_that_raised_is_read_after_eviction(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.save_state("tenant-b/conv", SessionState({"turn": 1}), None)
    await store.flush()

    async def broken(ops: list[Any]) -> bool:
        raise RuntimeError("the batch failed")

    monkeypatch.setattr(store, "_write_batch", broken)
    await store.save_state("tenant-b/conv", SessionState({"turn": 2}), None)
    await store.flush()
    monkeypatch.undo()
    await evict(store)
    assert (await store.load_state("tenant-b/conv"))[0].get("turn") == 2


async def test_the_failed_saves_kept_are_bounded(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(ops: list[Any]) -> bool:
        raise RuntimeError("the batch failed")

    monkeypatch.setattr(store, "_write_batch", broken)
    for i in range(10):  # the cache holds 4: as many failed saves are kept
        await store.save_state(f"tenant-a/s{i}", SessionState({"n": i}), None)
        await store.flush()
    assert len(store._unwritten) == 4
    for i in range(6, 10):
        store._states.pop(f"tenant-a/s{i}")
        assert (await store.load_state(f"tenant-a/s{i}"))[0].get("n") == i
