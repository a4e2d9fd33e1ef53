"""A session whose requests come close behind one another (the next one arriving while the last
one's save waits or runs, or within ``PARK_S`` after it) is saved without letting its advisory
lock go: the connection is parked, still holding the session, and the next request takes it with
no HOLD round trip (nobody can have written in between). Otherwise, after ``PARK_S`` or when
anything needs a connection, the lock is let go; another replica waits for it as for any holder
and reads what was saved. A session with requests far apart is saved and let go as before."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from proxy.store import pg_parked
from proxy.store import pg_queries as q
from proxy.store.postgres import PostgresStore
from rules.base import SessionState
from tests.support.postgres import PgServer, advisory_locks


@pytest.fixture
async def url(pg_server: PgServer) -> str:
    return pg_server.database()


@pytest.fixture
def long_park(monkeypatch: pytest.MonkeyPatch) -> float:
    """A park long enough that the tests' steps always come "close behind"."""
    monkeypatch.setattr(pg_parked, "PARK_S", 30.0)
    return 30.0


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The HOLD, SAVE, SAVE_KEPT and LET_GO statements sent, in order, by any connection."""
    out: list[str] = []
    names = {q.HOLD: "hold", q.SAVE: "save", q.SAVE_KEPT: "save_kept", q.LET_GO: "let_go"}
    fetchrow, fetchval = asyncpg.Connection.fetchrow, asyncpg.Connection.fetchval

    async def counting_row(self: Any, sql: str, *args: Any, **kw: Any) -> Any:
        if sql in names:
            out.append(names[sql])
        return await fetchrow(self, sql, *args, **kw)

    async def counting_val(self: Any, sql: str, *args: Any, **kw: Any) -> Any:
        if sql in names:
            out.append(names[sql])
        return await fetchval(self, sql, *args, **kw)

    monkeypatch.setattr(asyncpg.Connection, "fetchrow", counting_row)
    monkeypatch.setattr(asyncpg.Connection, "fetchval", counting_val)
    yield out


async def request(store: PostgresStore, n: int, session_id: str = "s") -> int:
    """One request of the session: the ``n`` it found, ``n`` saved; its save started at once."""
    async with store.session(session_id) as held:
        found = int(held.state.get("n", 0))
        await held.save(SessionState({"n": n}), None)
    store._deferred.go(session_id)
    return found


async def park(store: PostgresStore) -> None:
    """Session "s" served twice, close behind: its second save done and (``PARK_S`` long
    enough) its connection parked."""
    await request(store, 1)
    await request(store, 2)
    await saved(store)


async def saved(store: PostgresStore, session_id: str = "s") -> None:
    """The session's save under way here, done."""
    task = store._deferred.task_of(session_id)
    if task is not None:
        await asyncio.wait({task})


async def test_a_session_close_behind_is_held_without_a_round_trip(
    url: str, long_park: float, sent: list[str]
) -> None:
    store = PostgresStore(url, batch_window_s=0.0)
    await store.open()
    try:
        assert await request(store, 1) == 0
        assert await request(store, 2) == 1  # during the first's save: this one's save keeps
        await saved(store)
        assert sent == ["hold", "save", "hold", "save_kept"]
        assert await advisory_locks(url) == 1  # parked, still holding the session
        assert await request(store, 3) == 2
        assert await request(store, 4) == 3
        await saved(store)
        assert sent[4:] == ["save_kept", "save_kept"]  # no hold: the parked connection
        assert await advisory_locks(url) == 1
        await store.flush()  # lets it go
        assert sent[-1] == "let_go"
        assert await advisory_locks(url) == 0
    finally:
        await store.close()
    assert await advisory_locks(url) == 0


async def test_the_park_ends_after_park_s(url: str, sent: list[str]) -> None:
    store = PostgresStore(url, batch_window_s=0.0)
    await store.open()
    try:
        await park(store)
        for _ in range(200):  # PARK_S later the lock is let go
            if await advisory_locks(url) == 0:
                break
            await asyncio.sleep(0.01)
        assert await advisory_locks(url) == 0
        assert sent[-1] == "let_go" and not store._parked
        await asyncio.sleep(2 * pg_parked.PARK_S)
        assert await request(store, 3) == 2  # far behind: a hold, and the save lets go
        await saved(store)
        assert sent[-2:] == ["hold", "save"]
        assert await advisory_locks(url) == 0
    finally:
        await store.close()


async def test_another_replica_waits_for_the_park_and_reads_the_save(
    url: str, long_park: float
) -> None:
    a, b = PostgresStore(url, batch_window_s=0.0), PostgresStore(url, batch_window_s=0.0)
    await a.open()
    await b.open()
    try:
        await park(a)
        assert "s" in a._parked
        # B waits on the lock; a request waiting for a connection on A lets parked ones go,
        # here the flush does
        on_b = asyncio.create_task(request(b, 3))
        await asyncio.sleep(0.2)
        assert not on_b.done()  # held by A's parked connection
        await a.flush()
        assert await on_b == 2  # what A saved
        await saved(b)
        assert await request(a, 4) == 3  # A reads B's write: its cached state is not trusted
    finally:
        await a.close()
        await b.close()
    assert await advisory_locks(url) == 0


async def test_a_session_pruned_while_parked_starts_afresh(url: str, long_park: float) -> None:
    store = PostgresStore(url, batch_window_s=0.0)
    await store.open()
    try:
        await park(store)
        assert "s" in store._parked
        counts = await store.prune(0.0, 1e12)  # every session idle
        assert counts["sessions"] == 1
        assert await request(store, 3) == 0  # read, not the state cached before the prune
        await store.flush()
        assert await advisory_locks(url) == 0  # the parked lock was let go, not stacked
    finally:
        await store.close()


async def test_a_connection_wait_lets_parked_sessions_go(url: str, long_park: float) -> None:
    store = PostgresStore(url, pool_size=2, batch_window_s=0.0)
    await store.open()
    try:
        await request(store, 1, "x")
        await request(store, 2, "x")
        await saved(store, "x")
        assert "x" in store._parked
        other = await store._pool.take()  # the other one in use: none left
        try:
            async with asyncio.timeout(5):  # the wait for one lets the parked one go
                assert await request(store, 1, "y") == 0
        finally:
            store._pool.give(other)
        assert "x" not in store._parked
    finally:
        await store.close()
    assert await advisory_locks(url) == 0


async def test_no_park_when_connections_are_scarce(
    url: str, long_park: float, sent: list[str]
) -> None:
    store = PostgresStore(url, pool_size=2, batch_window_s=0.0)
    await store.open()
    try:
        await request(store, 1)
        other = await store._pool.take()  # with this one, more than half in use at the save
        try:
            await request(store, 2)  # close behind, but saved and let go as usual
            await saved(store)
        finally:
            store._pool.give(other)
        assert sent == ["hold", "save", "hold", "save"] and not store._parked
        assert await advisory_locks(url) == 0
    finally:
        await store.close()


async def test_a_wait_begun_during_the_kept_save_is_not_left_behind_the_park(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request that starts waiting for a connection while a save that keeps its session is
    under way (``on_wait`` finds nothing parked yet) gets that connection once the save is
    done, not after ``PARK_S``: the save lets go at once rather than park."""
    monkeypatch.setattr(pg_parked, "PARK_S", 30.0)  # a park that would make the waiter wait long
    store = PostgresStore(url, pool_size=2, batch_window_s=0.0)
    await store.open()
    fetchval = asyncpg.Connection.fetchval
    started: dict[str, Any] = {}

    async def during_save(self: Any, sql: str, *args: Any, **kw: Any) -> Any:
        if sql == q.SAVE_KEPT and "waiter" not in started:
            # while the save's round trip runs, the other connection is taken and one more
            # request starts waiting for a connection (on_wait: nothing parked yet)
            started["other"] = await store._pool.take()
            started["waiter"] = asyncio.create_task(store._pool.take())
            for _ in range(5):
                await asyncio.sleep(0)
            assert store._pool._waiting
        return await fetchval(self, sql, *args, **kw)

    monkeypatch.setattr(asyncpg.Connection, "fetchval", during_save)
    try:
        await request(store, 1)
        await request(store, 2)  # close behind: its save keeps the session
        task = store._deferred.task_of("s")
        if task is not None:
            await asyncio.wait({task})
        assert "waiter" in started
        waiter: asyncio.Task[Any] = started["waiter"]
        try:
            # the connection is parked although someone waits for one: it should be let go
            async with asyncio.timeout(2):
                conn = await asyncio.shield(waiter)
            store._pool.give(conn)
        finally:
            store._pool.give(started["other"])
            await store.flush()
            if not waiter.done():
                store._pool.give(await waiter)
    finally:
        await store.close()
    assert await advisory_locks(url) == 0
