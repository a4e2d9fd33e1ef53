"""On PostgreSQL a session's save is a HOT update (migration m011_sessions_hot: no index on
``updated_at``, room left on the pages), and the retention prune, which no longer has that index,
walks the primary key a bounded step at a time, deleting the idle sessions only."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from proxy.store import pg_queries as q
from proxy.store.postgres import PostgresStore
from rules.base import SessionState
from tests.support.postgres import PgServer


@pytest.fixture
async def url(pg_server: PgServer) -> str:
    return pg_server.database()


async def updates(url: str) -> tuple[int, int]:
    """(updates, HOT updates) of ``sessions`` so far, as the statistics have them."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("SELECT pg_stat_force_next_flush()")
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        row = await conn.fetchrow(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'sessions'"
        )
        return int(row[0]), int(row[1])
    finally:
        await conn.close()


async def save(store: PostgresStore, session_id: str, n: int) -> None:
    async with store.session(session_id) as held:
        await held.save(SessionState({"n": n, "pad": "x" * 500}), None)
    await store.flush()


async def test_a_save_is_a_hot_update(url: str) -> None:
    store = PostgresStore(url, batch_window_s=0.0)
    await store.open()
    try:
        for i in range(5):  # the rows made
            await save(store, f"s{i}", 0)
        for n in range(1, 11):
            for i in range(5):
                await save(store, f"s{i}", n)
    finally:
        await store.close()  # its backends report their statistics as they exit
    for _ in range(100):
        done = await updates(url)
        if done[0] >= 50:
            break
        await asyncio.sleep(0.05)
    assert done == (50, 50)  # every save of an existing row HOT
    conn = await asyncpg.connect(url)
    try:
        indexes = await conn.fetch("SELECT indexname FROM pg_indexes WHERE tablename = 'sessions'")
    finally:
        await conn.close()
    assert [r[0] for r in indexes] == ["sessions_pkey"]


async def test_the_prune_walks_the_sessions_in_bounded_steps(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(q, "STEP_ROWS", 3)
    store = PostgresStore(url, batch_window_s=0.0)
    await store.open()
    try:
        for i in range(10):
            await save(store, f"s{i:02}", 1)
        conn = await asyncpg.connect(url)
        try:  # the even ones idle for a day, each with a cache report
            await conn.execute(
                "UPDATE sessions SET updated_at = $1 WHERE right(id, 1)::int % 2 = 0",
                time.time() - 86_400,
            )
            await conn.execute(
                "INSERT INTO session_cache (session_id, at) "
                "SELECT id, 0 FROM sessions WHERE right(id, 1)::int % 2 = 0"
            )
            counts = await store.prune(0.0, time.time() - 3_600)
            left = [r[0] for r in await conn.fetch("SELECT id FROM sessions ORDER BY id")]
            cache = await conn.fetchval("SELECT count(*) FROM session_cache")
        finally:
            await conn.close()
    finally:
        await store.close()
    assert counts == {"requests": 0, "sessions": 5, "session_cache": 5, "response_ids": 0}
    assert left == [f"s{i:02}" for i in range(1, 10, 2)]
    assert cache == 0
