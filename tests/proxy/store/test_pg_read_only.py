"""PostgreSQL that refuses writes for a while, its connections open: a server set read-only
(``default_transaction_read_only``, as a managed database is when its disk nears full) or out of
disk. The log's writes are held, as while it is away (bounded by ``store.buffer_rows``), and
written once it takes writes again, not each refused and lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from proxy.store.pg_writer import CLOSE_WAIT_S, unwritable
from proxy.store.postgres import PostgresStore
from rules.base import SessionState
from tests.support.postgres import PgServer, advisory_locks, count


async def read_only(server: PgServer, on: bool) -> None:
    """Set the whole server read-only or writable again (a reload: open sessions follow)."""
    admin = await asyncpg.connect(server.admin_url)
    try:
        await admin.execute("SET default_transaction_read_only = off")
        value = "on" if on else "DEFAULT"
        await admin.execute(f"ALTER SYSTEM SET default_transaction_read_only = {value}")
        await admin.execute("SELECT pg_reload_conf()")
    finally:
        await admin.close()
    # a new session sees it once the server reloaded, which then signalled the open ones
    deadline, wanted = time.monotonic() + 10, "on" if on else "off"
    while time.monotonic() < deadline:
        probe = await asyncpg.connect(server.admin_url)
        try:
            if await probe.fetchval("SHOW default_transaction_read_only") == wanted:
                break
        finally:
            await probe.close()
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.1)  # each open session takes the signal before its next statement


@pytest.fixture
async def server(own_server: PgServer) -> AsyncIterator[PgServer]:
    yield own_server
    await read_only(own_server, False)


async def test_log_rows_wait_out_a_read_only_database(server: PgServer) -> None:
    url = server.database()
    store = PostgresStore(url, batch_window_s=0.005)
    await store.open()
    try:
        await read_only(server, True)
        for i in range(3):
            await store.insert_request({"id": f"r{i}", "created_at": time.time()})
            await store.finish_request(f"r{i}", {"status": 200, "latency_ms": 1.0})
        await asyncio.sleep(1.0)
        assert (store.write_errors, store.rows_dropped) == (0, 0)
        assert store.backlog > 0  # held, not lost
        await read_only(server, False)
        await asyncio.wait_for(store.flush(), 10.0)
        assert await count(url, "SELECT count(*) FROM requests WHERE status = 200") == 3
        assert store.write_errors == 0
    finally:
        await store.close()


async def test_a_session_saved_while_read_only_is_kept_and_stored_after(
    server: PgServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = server.database()
    store = PostgresStore(url, batch_window_s=0.005)
    await store.open()
    try:
        await read_only(server, True)
        for n in (1, 2, 3):  # each request finds the state its previous one left
            async with store.session("alice/s") as held:
                assert held.state.data == ({"n": n - 1} if n > 1 else {})
                await held.save(SessionState({"n": n}), None)
        refused = [r for r in caplog.records if "takes no writes" in r.getMessage()]
        assert len(refused) == 1 and not any(r.exc_info for r in caplog.records)
        await read_only(server, False)
        async with store.session("alice/s") as held:
            assert held.state.data == {"n": 3}
            await held.save(SessionState({"n": 4}), None)
    finally:
        await store.close()
    other = PostgresStore(url)  # another replica, or this one restarted
    await other.open()
    try:
        assert (await other.load_state("alice/s"))[0].data == {"n": 4}
    finally:
        await other.close()


async def test_closing_while_read_only_gives_the_held_writes_up_in_bounded_time(
    server: PgServer,
) -> None:
    store = PostgresStore(server.database(), batch_window_s=0.005)
    await store.open()
    await read_only(server, True)
    await store.insert_request({"id": "r", "created_at": time.time()})
    await asyncio.sleep(0.3)
    writer, started = store.writer, time.monotonic()
    await asyncio.wait_for(store.close(), 15.0)
    assert time.monotonic() - started < CLOSE_WAIT_S + 3
    assert writer.rows_dropped == 1  # lost at last, and counted


async def test_heartbeats_refused_while_read_only_log_no_traceback(
    server: PgServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = PostgresStore(server.database(), batch_window_s=0.005, heartbeat_s=0.1)
    await store.open()
    try:
        await read_only(server, True)

        def refusals() -> int:
            return sum("takes no writes" in r.getMessage() for r in caplog.records)

        deadline = time.monotonic() + 10
        while not refusals() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # several more beats refused
        assert not any(r.exc_info for r in caplog.records)
        assert refusals() == 1
    finally:
        await read_only(server, False)
        await store.close()


async def test_a_refused_save_lets_its_session_go_and_keeps_the_connection(
    server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = server.database()
    store = PostgresStore(url, batch_window_s=0.005)
    await store.open()
    try:
        closed: list[object] = []
        pool, discard = store._pool, store._pool.discard
        monkeypatch.setattr(pool, "discard", lambda conn: (closed.append(conn), discard(conn)))
        await read_only(server, True)
        for n in range(5):
            async with store.session("alice/s") as held:
                await held.save(SessionState({"n": n}), None)
        # the save was refused, the connection sound: its lock let go and the connection pooled
        # (each request connected afresh: a new server process per request)
        assert closed == []
        assert await advisory_locks(url) == 0
    finally:
        await read_only(server, False)
        await store.close()


@pytest.mark.parametrize(
    ("error", "waited"),
    [
        (asyncpg.exceptions.ReadOnlySQLTransactionError, True),
        (asyncpg.exceptions.DiskFullError, True),
        (asyncpg.exceptions.TooManyConnectionsError, True),
        (asyncpg.exceptions.PostgresIOError, True),
        (asyncpg.exceptions.OutOfMemoryError, False),  # a batch may run out of it itself
        (asyncpg.exceptions.ConfigurationLimitExceededError, False),  # max_locks_per_transaction
        (asyncpg.exceptions.UndefinedFileError, False),
    ],
)
def test_only_the_servers_own_wants_are_waited_out(error: type[Exception], waited: bool) -> None:
    """A batch refused for what it asked itself (memory, a configured limit) is written row by
    row, the row at fault lost; waited out, it held the writer until close."""
    assert unwritable(error("refused")) is waited
