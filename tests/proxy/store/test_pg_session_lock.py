"""The PostgreSQL store's session lock (session-level, taken and read in one call, released by
the save's own call after its commit): never left behind on a pooled connection, whatever
happens while it is held; a wait past ``lock_timeout_s`` serves the session read-only; a replica
whose connection dies frees its sessions; the next holder always reads the last commit."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg
import pytest

from proxy.store.pg_writer import is_connection_error
from proxy.store.postgres import PostgresStore
from rules.base import SessionState
from tests.support.postgres import PgServer, advisory_locks


@pytest.fixture
async def url(pg_server: PgServer) -> str:
    return pg_server.database()


@pytest.fixture
async def two(url: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    a = PostgresStore(url, batch_window_s=0.0, lock_timeout_s=0.3)
    b = PostgresStore(url, batch_window_s=0.0, lock_timeout_s=0.3)
    await a.open()
    await b.open()
    yield a, b
    await a.close()
    await b.close()


async def test_no_lock_is_left_behind(two: tuple[PostgresStore, PostgresStore], url: str) -> None:
    a, b = two
    async with a.session("s") as held:  # saved
        await held.save(SessionState({"n": 1}), None)
    async with a.session("t"):  # no save
        pass
    with pytest.raises(RuntimeError):  # the pipeline failed
        async with b.session("s") as held:
            await held.save(SessionState({"n": 99}), None)
            raise RuntimeError("boom")
    await a.load_state("s")
    await a.flush()
    await b.flush()
    assert await advisory_locks(url) == 0
    assert (await b.load_state("s"))[0].get("n") == 1
    # no commit waits for the WAL flush: a setting of the pool's connections, not a statement
    assert await a._pool.fetchval("SHOW synchronous_commit") == "off"


async def test_a_wait_past_the_timeout_is_read_only(
    two: tuple[PostgresStore, PostgresStore], url: str
) -> None:
    a, b = two
    async with a.session("s") as held:
        await held.save(SessionState({"n": 1}), None)
    await a.flush()
    async with a.session("s") as held_a:
        async with b.session("s") as held_b:  # a holds it: b waits 0.3 s, then reads what it knows
            assert held_b.read_only and b.lock_timeouts == 1
            await held_b.save(SessionState({"n": 50}), None)  # not stored
        await held_a.save(SessionState({"n": 2}), None)
    await a.flush()
    assert (await b.load_state("s"))[0].get("n") == 2
    assert await advisory_locks(url) == 0


async def test_a_table_an_operator_locked_leaves_no_session_lock(
    two: tuple[PostgresStore, PostgresStore], url: str
) -> None:
    """The hold takes the session's lock, then reads the tables: a wait there past the timeout
    (an operator's VACUUM FULL, REINDEX or ALTER) comes after the lock was taken. The connection
    went back to the pool holding it, and every other replica served the session read-only."""
    a, b = two
    locker = await asyncpg.connect(url)
    try:
        async with locker.transaction():
            await locker.execute("LOCK TABLE session_cache IN ACCESS EXCLUSIVE MODE")
            async with a.session("s") as held:
                assert held.read_only
    finally:
        await locker.close()
    assert await advisory_locks(url) == 0
    async with b.session("s") as held:
        assert not held.read_only
        await held.save(SessionState({"n": 2}), None)
    await b.flush()
    assert b.lock_timeouts == 0
    assert (await a.load_state("s"))[0].get("n") == 2


async def test_a_save_the_database_refuses_frees_the_lock(
    two: tuple[PostgresStore, PostgresStore], url: str
) -> None:
    a, b = two
    async with a.session("s") as held:
        await held.save(SessionState({"n": 1}), None)
    await a.flush()
    async with a.session("s") as held:
        await held.save(SessionState({"n": 2}), "\x00")  # text cannot hold NUL: refused
    await a.flush()  # logged, and the connection closed rather than pooled with the lock
    async with b.session("s") as other:  # not read-only: the lock was free
        assert not other.read_only and other.state.get("n") == 1
    assert await advisory_locks(url) == 0


async def test_a_dead_connection_frees_its_sessions(
    two: tuple[PostgresStore, PostgresStore], url: str
) -> None:
    a, b = two
    async with a.session("s") as held:
        await held.save(SessionState({"n": 1}), None)
    await a.flush()
    async with a.session("s") as held:
        pid = held.conn.get_server_pid()
        admin = await asyncpg.connect(url)
        try:
            await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
        finally:
            await admin.close()
        await asyncio.sleep(0.1)
        async with b.session("s") as other:  # the server dropped a's lock with its connection
            assert not other.read_only
            await other.save(SessionState({"n": 7}), None)
        await held.save(SessionState({"n": 2}), None)  # a's save fails: kept in memory
    await a.flush()
    await b.flush()
    assert (await b.load_state("s"))[0].get("n") == 7
    await asyncio.sleep(0.5)  # a skips the database for a while after a connection failure
    assert (await a.load_state("s"))[0].get("n") == 7  # a's cache is checked, not trusted
    assert await advisory_locks(url) == 0


def test_a_connection_the_server_ended_while_idle_counts_as_gone() -> None:
    """Handed out of the pool before asyncpg saw the server's FATAL: fail open, not a 500."""
    exc = asyncpg.InternalClientError(
        "cannot switch to state 12; another operation (2) is in progress"
    )
    assert is_connection_error(exc)


async def test_a_full_pool_serves_read_only_without_waiting_again(url: str) -> None:
    """A hold that timed out waiting for a pooled connection serves the session read-only; the
    request then reads the session's cache report, and that read waited for a connection with no
    bound (as long as the other sessions held them), after the lock timeout already spent."""
    store = PostgresStore(url, pool_size=1, batch_window_s=0.0, lock_timeout_s=0.3)
    await store.open()
    try:
        # the pool's one connection held, then a hold waiting for it
        async with store.session("busy"), store.session("s") as held:
            assert held.read_only
            async with asyncio.timeout(1.0):
                assert await store.cache_feedback.get("s") is None
    finally:
        await store.close()


async def test_requests_queued_on_a_session_wait_one_lock_timeout_in_all(
    two: tuple[PostgresStore, PostgresStore], url: str
) -> None:
    """A replica holding a session stalls: the other replica's requests of that session queue
    behind each other here, and each waited its own lock timeout after each of the ones before
    it (4 requests: 0.3, 0.6, 0.9, 1.2 s). One wait of the lock timeout in all, here and there."""
    a, b = two
    async with a.session("s") as held:
        await held.save(SessionState({"n": 1}), None)
    await a.flush()

    async def request() -> tuple[float, bool]:
        started = asyncio.get_running_loop().time()
        async with b.session("s") as held_b:
            await asyncio.sleep(0.01)  # the rules run
            return asyncio.get_running_loop().time() - started, held_b.read_only

    async with a.session("s"):  # a holds it, and never lets go within the requests' waits
        waited = await asyncio.gather(*(request() for _ in range(4)))
    assert all(read_only for _, read_only in waited)
    assert max(seconds for seconds, _ in waited) < 0.3 + 0.25, waited
    assert b.lock_timeouts == 4
    async with b.session("s") as held:  # a let go: held, and the state as a saved it
        assert not held.read_only and held.state.get("n") == 1
    await a.flush()
    await b.flush()
    assert await advisory_locks(url) == 0


async def test_the_wait_for_the_principals_slot_is_not_charged_to_the_lock_timeout(
    two: tuple[PostgresStore, PostgresStore], url: str
) -> None:
    """A request waits for one of its principal's slots (``hold_slots``: its other sessions'
    holds) past the lock timeout, then for the session's lock, held a moment by another replica.
    The slot's wait is its own queue: charged to the lock timeout, the hold had a millisecond
    left and served the session read-only (its state unsaved) under a tenant's burst."""
    a, b = two
    async with a.session("s") as held:
        await held.save(SessionState({"n": 1}), None)
    await a.flush()

    @contextlib.asynccontextmanager
    async def queued_slot() -> AsyncIterator[None]:
        await asyncio.sleep(0.5)  # the principal's other holds, past the 0.3 s lock timeout
        yield

    async def other_replica() -> None:
        async with a.session("s"):
            await asyncio.sleep(0.6)  # lets go 0.1 s after the slot is had

    holder = asyncio.create_task(other_replica())
    await asyncio.sleep(0.05)
    async with b.session("s", queued_slot()) as held_b:
        assert not held_b.read_only and held_b.state.get("n") == 1
    await holder
    assert b.lock_timeouts == 0
    await a.flush()
    await b.flush()
    assert await advisory_locks(url) == 0
