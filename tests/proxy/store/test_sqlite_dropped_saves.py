"""A session's save that finds the SQLite writer's queue full (``store.buffer_rows``: the
database slow or locked for long) is held, not lost: a later request of the session reads it
however many other sessions' states the state cache took in since (its tenant's other sessions
evicting it, which left the session's older stored state to be read), and the writer queues it
again once its queue is at most half full, so the database ends with it. At most as many
sessions' saves are held as the state cache holds entries; past that the principal holding most
loses its oldest held, counted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from proxy.store.dialect import SQLITE
from proxy.store.sqlite import SQLiteStore
from rules.base import SessionState

RELEASES: list[asyncio.Event] = []  # a failed test's stalled writer is let go before closing


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    opened = SQLiteStore(
        str(tmp_path / "log.db"), state_cache_size=4, buffer_rows=4, batch_window_s=0.001
    )
    await opened.open()
    try:
        yield opened
    finally:
        for release in RELEASES:
            release.set()
        RELEASES.clear()
        await opened.close()


async def stalled(store: SQLiteStore) -> tuple[asyncio.Event, asyncio.Task[Any]]:
    """The writer held in a call of its own until the event is set (the database busy)."""
    inside, release = asyncio.Event(), asyncio.Event()
    RELEASES.append(release)

    async def wait(_: Any) -> None:
        inside.set()
        await release.wait()

    task = asyncio.create_task(store.in_writer(wait))
    await asyncio.wait_for(inside.wait(), 5)
    return release, task


def fill(store: SQLiteStore) -> None:
    """The queue filled with other writes (a tenant's cache reports)."""
    for i in range(store.buffer_rows):
        store.write_later(SQLITE.feedback_upsert, (f"tenant-a/s{i}", 1.0, 10, 5, 0))
    assert store.backlog == store.buffer_rows


async def test_a_save_dropped_for_a_full_queue_survives_eviction_and_lands(
    store: SQLiteStore, tmp_path: Path
) -> None:
    await store.save_state("tenant-b/conv", SessionState({"turn": 1}), None)
    await store.flush()
    release, task = await stalled(store)
    fill(store)
    await store.save_state("tenant-b/conv", SessionState({"turn": 2}), None)  # queue full
    for i in range(20):  # b's other sessions read in: the state cache evicts this one
        await store.load_state(f"tenant-b/other{i}")
    assert "tenant-b/conv" not in store._states
    assert (await store.load_state("tenant-b/conv"))[0].get("turn") == 2
    release.set()
    await task
    await store.flush()
    assert store.write_errors == 0
    reopened = SQLiteStore(str(tmp_path / "log.db"))
    await reopened.open()
    try:
        assert (await reopened.load_state("tenant-b/conv"))[0].get("turn") == 2
    finally:
        await reopened.close()


async def test_a_newer_save_queued_meanwhile_wins_over_the_held_one(store: SQLiteStore) -> None:
    release, task = await stalled(store)
    fill(store)
    await store.save_state("tenant-b/conv", SessionState({"turn": 1}), None)  # held
    release.set()
    await task
    await store.flush()
    release, task = await stalled(store)
    fill(store)
    await store.save_state("tenant-b/conv", SessionState({"turn": 2}), None)  # held
    release.set()
    await task
    await store.save_state("tenant-b/conv", SessionState({"turn": 3}), None)  # queued
    await store.flush()
    store._states.pop("tenant-b/conv")
    assert (await store.load_state("tenant-b/conv"))[0].get("turn") == 3
    assert store._unwritten == {} and store.write_errors == 0


async def test_the_saves_held_are_bounded(store: SQLiteStore) -> None:
    release, task = await stalled(store)
    fill(store)
    for i in range(10):  # the cache holds 4: as many saves are held, the oldest lost
        await store.save_state(f"tenant-a/s{i}", SessionState({"n": i}), None)
    assert store.write_errors == 6
    assert len(store._unwritten) == 4
    release.set()
    await task
    await store.flush()
    for i in range(6, 10):
        store._states.pop(f"tenant-a/s{i}")
        assert (await store.load_state(f"tenant-a/s{i}"))[0].get("n") == i


async def test_a_held_save_is_written_when_the_store_closes(tmp_path: Path) -> None:
    path = str(tmp_path / "log.db")
    store = SQLiteStore(path, buffer_rows=4, batch_window_s=0.001)
    await store.open()
    try:
        release, task = await stalled(store)
        fill(store)
        await store.save_state("tenant-b/conv", SessionState({"turn": 2}), None)  # held
        release.set()
        await task
    finally:
        release.set()
        await store.close()
    reopened = SQLiteStore(path)
    await reopened.open()
    try:
        assert (await reopened.load_state("tenant-b/conv"))[0].get("turn") == 2
    finally:
        await reopened.close()


async def test_another_tenants_held_saves_do_not_push_out_a_victims(
    store: SQLiteStore, tmp_path: Path
) -> None:
    """Past the bound, the principal holding most held saves loses its oldest: one tenant's many
    sessions saved while the database is locked do not lose another tenant's save."""
    release, task = await stalled(store)
    fill(store)
    await store.save_state("tenant-b/conv", SessionState({"turn": 2}), None)  # held first
    for i in range(10):
        await store.save_state(f"tenant-a/s{i}", SessionState({"n": i}), None)
    assert store.write_errors == 7  # a's 7 oldest: 4 held at most, b's among them
    assert "tenant-b/conv" in store._unwritten
    release.set()
    await task
    await store.flush()
    reopened = SQLiteStore(str(tmp_path / "log.db"))
    await reopened.open()
    try:
        assert (await reopened.load_state("tenant-b/conv"))[0].get("turn") == 2
        assert (await reopened.load_state("tenant-a/s9"))[0].get("n") == 9
    finally:
        await reopened.close()
