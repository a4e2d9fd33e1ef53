"""The writes queued while the database cannot take them (SQLite's file locked, PostgreSQL away)
are bounded by their bytes, not only their count (``store.buffer_rows``): with
``capture_payloads`` a request's row carries its redacted bodies (up to the body limit each), so
100,000 rows could hold hundreds of GB and one tenant's large requests during an outage took the
memory every tenant's requests need. Past ``store.buffer_bytes`` a new write is dropped
(counted), and one principal holds at most half of it: another tenant's row still finds room."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from proxy.store.batch import Insert
from proxy.store.pg_writer import Health, PgWriter
from proxy.store.sqlite import SQLiteStore

MIB = 1 << 20
BODY = "x" * (2 * MIB)  # one string shared by every row: counted per row, held once here
BOUND = 256 * MIB  # store.buffer_bytes by default


def row(i: int, principal: str) -> dict[str, Any]:
    return {
        "id": f"req_{principal}_{i}",
        "created_at": 1.0 + i,
        "principal": principal,
        "session_id": f"{principal}/s{i}",
        "request_body": BODY,
        "forwarded_body": BODY,
    }


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    opened = SQLiteStore(str(tmp_path / "log.db"), batch_window_s=0.001)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


async def test_sqlite_queued_rows_are_bounded_by_their_bytes_fairly(store: SQLiteStore) -> None:
    inside, release = asyncio.Event(), asyncio.Event()

    async def wait(_: Any) -> None:  # the database locked (a backup, a shell in a transaction)
        inside.set()
        await release.wait()

    stalled = asyncio.create_task(store.in_writer(wait))
    await asyncio.wait_for(inside.wait(), 5)
    try:
        for i in range(100):  # 400 MiB of captured bodies
            await store.insert_request(row(i, "tenant-a"))
        assert store.backlog * 4 * MIB <= BOUND // 2 + 4 * MIB
        assert store.write_errors > 0
        await store.insert_request(row(0, "tenant-b"))
        await store.finish_request("req_tenant-b_0", {"status": 200, "response_body": BODY})
        assert store.backlog * 4 * MIB <= BOUND + 4 * MIB
    finally:
        release.set()
        await stalled
    await store.flush()
    got = await store.fetchall("SELECT id, status FROM requests WHERE principal = ?", ("tenant-b",))
    assert [tuple(r) for r in got] == [("req_tenant-b_0", 200)]


async def test_postgres_queued_rows_are_bounded_by_their_bytes_fairly() -> None:
    writer = PgWriter(object(), Health(), buffer_rows=100_000)  # not started
    for i in range(100):  # the database away: nothing is taken off the queue
        writer.enqueue(Insert(row(i, "tenant-a")))
    assert writer.backlog * 4 * MIB <= BOUND // 2 + 4 * MIB
    assert writer.rows_dropped > 0
    dropped = writer.rows_dropped
    writer.enqueue(Insert(row(0, "tenant-b")))
    assert writer.rows_dropped == dropped
