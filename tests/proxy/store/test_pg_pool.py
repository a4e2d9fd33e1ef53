"""The PostgreSQL store's connections (``proxy.store.pg_pool``): never more than ``size`` open,
those waiting served in order, a wait bounded by its timeout, a connection that may hold a lock
(discarded) or is mid-transaction never pooled, its place given to the next in line. The logic on
stand-in connections; what the server sees on a real one."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import asyncpg
import pytest

from proxy.store.pg_pool import Connections
from tests.support.postgres import PgServer, advisory_locks


class FakeConnection:
    ids = itertools.count(1)

    def __init__(self) -> None:
        self.id = next(self.ids)
        self.closed = False
        self.in_transaction = False

    def is_closed(self) -> bool:
        return self.closed

    def is_in_transaction(self) -> bool:
        return self.in_transaction

    def terminate(self) -> None:
        self.closed = True

    async def close(self) -> None:
        self.closed = True


def fake_pool(size: int) -> tuple[Connections, list[FakeConnection]]:
    pool = Connections("postgresql://unused", size, connect_timeout=1.0)
    opened: list[FakeConnection] = []

    async def connect(timeout: float | None) -> Any:
        opened.append(FakeConnection())
        return opened[-1]

    pool._connect = connect  # type: ignore[method-assign]
    return pool, opened


async def test_connections_are_reused_and_never_more_than_the_size() -> None:
    pool, opened = fake_pool(2)
    a, b = await pool.take(), await pool.take()
    third = asyncio.ensure_future(pool.take())
    await asyncio.sleep(0.01)
    assert not third.done() and len(opened) == 2
    pool.give(a)
    assert await third is a  # handed over, not reopened
    pool.give(b)
    assert await pool.take() is b and len(opened) == 2


async def test_those_waiting_are_served_in_order_and_a_wait_is_bounded() -> None:
    pool, _ = fake_pool(1)
    held = await pool.take()
    first = asyncio.ensure_future(pool.take())
    second = asyncio.ensure_future(pool.take())
    with pytest.raises(TimeoutError):
        await pool.take(timeout=0.02)
    await asyncio.sleep(0)
    pool.give(held)
    assert await first is held
    assert not second.done()
    pool.give(held)
    assert await second is held
    assert pool.in_use == 1 and not pool._waiting


async def test_a_discarded_connection_is_closed_and_its_place_goes_to_the_next_in_line() -> None:
    pool, opened = fake_pool(1)
    held = await pool.take()
    waiting = asyncio.ensure_future(pool.take())
    await asyncio.sleep(0)
    pool.discard(held)
    fresh = await waiting
    assert held.closed and fresh is not held and len(opened) == 2
    pool.discard(fresh)  # nobody waiting: the place is free
    assert pool.in_use == 0 and pool._open == 0


async def test_a_connection_mid_transaction_or_closed_is_not_pooled() -> None:
    pool, _ = fake_pool(2)
    a, b = await pool.take(), await pool.take()
    a.in_transaction = True
    pool.give(a)
    b.closed = True
    pool.give(b)
    assert a.closed and pool._open == 0
    assert await pool.take() not in (a, b)


async def test_a_connection_handed_to_a_waiter_that_gave_up_goes_to_the_next() -> None:
    pool, _ = fake_pool(1)
    held = await pool.take()
    leaving = asyncio.ensure_future(pool.take())
    staying = asyncio.ensure_future(pool.take())
    await asyncio.sleep(0)
    pool.give(held)  # to ``leaving``, which is cancelled before it runs
    leaving.cancel()
    assert await staying is held
    assert pool.in_use == 1


async def test_a_failed_connect_frees_its_place() -> None:
    pool = Connections("postgresql://127.0.0.1:1/none", 1, connect_timeout=1.0)
    with pytest.raises(OSError):
        await pool.take()
    assert pool._open == 0


async def test_closing_wakes_those_waiting_and_refuses_new_requests() -> None:
    pool, _ = fake_pool(1)
    held = await pool.take()
    waiting = asyncio.ensure_future(pool.take())
    await asyncio.sleep(0)
    await pool.close()
    with pytest.raises(asyncpg.InterfaceError, match="closed"):
        await waiting
    with pytest.raises(asyncpg.InterfaceError, match="closed"):
        await pool.take()
    pool.give(held)  # in use at close: closed as it comes back
    assert held.closed and pool._open == 0


async def test_a_discarded_connection_lets_its_advisory_lock_go(pg_server: PgServer) -> None:
    url = pg_server.database()
    pool = Connections(url, 2, connect_timeout=5.0)
    try:
        conn = await pool.take()
        await conn.execute("SELECT pg_advisory_lock(42)")
        pool.discard(conn)
        for _ in range(50):  # the server notices the closed socket
            if await advisory_locks(url) == 0:
                break
            await asyncio.sleep(0.02)
        assert await advisory_locks(url) == 0
        assert await pool.fetchval("SELECT 1") == 1  # a new connection in its place
        assert pool._open == 1 and pool.in_use == 0
    finally:
        await pool.close()


async def test_a_connection_idle_too_long_is_closed_not_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One a firewall may have dropped silently: a new one is opened in its place."""
    monkeypatch.setattr("proxy.store.pg_pool.MAX_IDLE_S", 0.05)
    pool, opened = fake_pool(1)
    old = await pool.take()
    pool.give(old)
    assert await pool.take() is old  # fresh enough: reused
    pool.give(old)
    await asyncio.sleep(0.08)
    new = await pool.take()
    assert new is not old and old.closed and len(opened) == 2
    assert pool.in_use == 1


async def test_a_setting_an_older_server_does_not_know_is_left_out(
    pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tcp_user_timeout`` came with PostgreSQL 12: a server before it refuses the connection
    naming it, and the pool connects again without it, the other settings kept."""
    monkeypatch.setattr("proxy.store.pg_pool.OPTIONAL_SETTINGS", ("ctxproxy_unknown",))
    settings = {"ctxproxy_unknown": "1", "synchronous_commit": "off"}
    pool = Connections(pg_server.database(), 2, connect_timeout=5.0, server_settings=settings)
    try:
        assert await pool.fetchval("SHOW synchronous_commit") == "off"
        assert await pool.fetchval("SELECT 1") == 1 and pool._open == 1
    finally:
        await pool.close()
    strict = Connections(pg_server.database(), 1, connect_timeout=5.0, server_settings=settings)
    monkeypatch.setattr("proxy.store.pg_pool.OPTIONAL_SETTINGS", ())
    with pytest.raises(asyncpg.UndefinedObjectError):  # one it needs: refused, as before
        await strict.take()
    assert strict._open == 0
