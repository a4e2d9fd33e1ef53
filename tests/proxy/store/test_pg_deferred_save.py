"""A session's save on PostgreSQL waits for its request's answer to go out (the request's log row
finished), at most ``SAVE_DEFER_S``, so a fast upstream's answer is relayed without the save
competing for the CPU. It starts at once when a request of the same session wants the session,
when a request waits for a connection (the waiting save holds one), at ``flush`` and at
``close``; another replica waits for it as for any holder and reads what it saved."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from proxy.store import pg_deferred
from proxy.store.postgres import PostgresStore
from rules.base import SessionState
from tests.support.postgres import PgServer, advisory_locks


@pytest.fixture
async def url(pg_server: PgServer) -> str:
    return pg_server.database()


@pytest.fixture
def long_defer(monkeypatch: pytest.MonkeyPatch) -> float:
    """A deferral long enough that a test finishing in time shows something else started it."""
    monkeypatch.setattr(pg_deferred, "SAVE_DEFER_S", 30.0)
    return 30.0


async def stored_n(url: str, session_id: str = "s") -> int | None:
    """The session's ``n`` as stored now (None: no row)."""
    conn = await asyncpg.connect(url)
    try:
        sql = "SELECT (state::jsonb ->> 'n')::int FROM sessions WHERE id = $1"
        n = await conn.fetchval(sql, session_id)
        return None if n is None else int(n)
    finally:
        await conn.close()


async def hold_and_save(store: PostgresStore, n: int, session_id: str = "s") -> None:
    async with store.session(session_id) as held:
        await held.save(SessionState({"n": n}), None)


async def test_the_save_waits_for_the_answer_then_goes(url: str, long_defer: float) -> None:
    store = PostgresStore(url, batch_window_s=0.0)
    await store.open()
    try:
        await hold_and_save(store, 1)
        await store.insert_request({"id": "r1", "created_at": time.time(), "session_id": "s"})
        await asyncio.sleep(0.1)
        assert await stored_n(url) is None  # still waiting: the answer is not out
        assert await advisory_locks(url) == 1  # and the session still held
        await store.finish_request("r1", {"status": 200})
        for _ in range(200):
            if await stored_n(url) == 1:
                break
            await asyncio.sleep(0.01)
        assert await stored_n(url) == 1
        assert not store._deferred._waiting and not store._deferred._answering
    finally:
        await store.close()
    assert await advisory_locks(url) == 0


async def test_without_an_answer_the_save_goes_after_the_bound(url: str) -> None:
    store = PostgresStore(url, batch_window_s=0.0)
    await store.open()
    try:
        started = time.monotonic()
        await hold_and_save(store, 1)
        while await stored_n(url) != 1:
            assert time.monotonic() - started < 5.0
            await asyncio.sleep(0.005)
        assert time.monotonic() - started >= pg_deferred.SAVE_DEFER_S * 0.9
    finally:
        await store.close()


async def test_the_next_request_of_the_session_starts_it(url: str, long_defer: float) -> None:
    store = PostgresStore(url, batch_window_s=0.0)
    await store.open()
    try:
        await hold_and_save(store, 1)
        async with asyncio.timeout(5):  # not the 30 s bound
            async with store.session("s") as held:
                assert held.state.get("n") == 1
                await held.save(SessionState({"n": 2}), None)
        await store.flush()  # starts the second one
        assert await stored_n(url) == 2
    finally:
        await store.close()


async def test_a_request_waiting_for_a_connection_starts_it(url: str, long_defer: float) -> None:
    store = PostgresStore(url, pool_size=2, batch_window_s=0.0)
    await store.open()
    try:
        await hold_and_save(store, 1, "s")
        await hold_and_save(store, 1, "t")  # both connections held by waiting saves
        async with asyncio.timeout(5):
            async with store.session("u") as held:
                await held.save(SessionState({"n": 3}), None)
        assert await stored_n(url, "s") == 1 and await stored_n(url, "t") == 1
    finally:
        await store.close()
    assert await stored_n(url, "u") == 3  # close saved it


async def test_another_replica_waits_for_it_and_reads_it(url: str) -> None:
    a = PostgresStore(url, batch_window_s=0.0)
    b = PostgresStore(url, batch_window_s=0.0)
    await a.open()
    await b.open()
    try:
        for n in range(1, 6):  # requests alternating between the replicas, no flush between
            await hold_and_save(a if n % 2 else b, n)
            other = b if n % 2 else a
            async with other.session("s") as held:  # waits for the save, then reads it
                assert held.state.get("n") == n
        await a.flush()
        await b.flush()
        assert await stored_n(url) == 5
    finally:
        await a.close()
        await b.close()
    assert await advisory_locks(url) == 0


async def test_close_saves_what_waits(url: str, long_defer: float) -> None:
    store = PostgresStore(url, batch_window_s=0.0)
    await store.open()
    await hold_and_save(store, 7)
    async with asyncio.timeout(5):
        await store.close()
    assert await stored_n(url) == 7
    assert await advisory_locks(url) == 0


async def test_the_log_row_is_written_as_before(url: str, long_defer: float) -> None:
    store = PostgresStore(url, batch_window_s=0.0)
    await store.open()
    try:
        await hold_and_save(store, 1)
        await store.insert_request({"id": "r1", "created_at": time.time(), "session_id": "s"})
        await store.finish_request("r1", {"status": 200})
        await store.flush()
        row = await store.get_request("r1")
        assert row is not None and row["status"] == 200 and row["session_id"] == "s"
        assert await stored_n(url) == 1
    finally:
        await store.close()


async def test_a_sub_agent_reads_what_its_parent_saved(url: str, long_defer: float) -> None:
    store = PostgresStore(url, batch_window_s=0.0)
    await store.open()
    try:
        await hold_and_save(store, 1, "parent")
        await store.flush()
        await hold_and_save(store, 2, "parent")  # its save waits for the parent's answer
        async with asyncio.timeout(5):  # not the 30 s bound
            async with store.session("child") as held:
                (parent,) = await held.ancestors("parent")
            assert parent.state.get("n") == 2
            assert [a.state.get("n") for a in await store.ancestors("parent")] == [2]
    finally:
        await store.close()


async def test_a_row_queued_before_the_save_still_starts_it_when_answered(
    url: str, long_defer: float
) -> None:
    """The server queues a request's row before its session's save is handed over (the upstream
    call starts first): the save still goes when that answer is out, not at the bound."""
    store = PostgresStore(url, batch_window_s=0.0)
    await store.open()
    try:
        await store.insert_request({"id": "r1", "created_at": time.time(), "session_id": "s"})
        await hold_and_save(store, 1)  # handed over after the row was queued
        assert await stored_n(url) is None  # waits for the answer
        await store.finish_request("r1", {"status": 200})
        async with asyncio.timeout(5):  # not the 30 s bound
            while await stored_n(url) != 1:
                await asyncio.sleep(0.01)
    finally:
        await store.close()
