"""PostgreSQL going away under the store (its own server: these tests stop it). Nothing waits on
it: a session is served from memory and its new state kept there, log rows stay queued up to
the bound, then are dropped and counted; when the database is back the backlog is written and
the state kept in memory is saved (unless another replica saved the session meanwhile)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from proxy.store.postgres import PostgresStore
from rules.base import SessionState
from tests.support.postgres import PgServer, count


@pytest.fixture
async def pg(own_server: PgServer) -> AsyncIterator[tuple[PgServer, PostgresStore]]:
    store = PostgresStore(own_server.database(), buffer_rows=200, batch_window_s=0.005)
    await store.open()
    yield own_server, store
    own_server.ensure_started()  # the test may have left it stopped
    await store.close()


async def count_rows(url: str) -> int:
    return await count(url, "SELECT count(*) FROM requests")


async def test_requests_go_on_while_the_database_is_away(
    pg: tuple[PgServer, PostgresStore],
) -> None:
    server, store = pg
    async with store.session("s") as held:
        await held.save(SessionState({"n": 1}), None)
    server.stop()
    started = time.monotonic()
    for i in range(50):
        await store.insert_request({"id": f"r{i}", "created_at": float(i)})
        await store.finish_request(f"r{i}", {"status": 200})
        async with store.session("s") as held:
            await held.save(SessionState({"n": held.state.get("n") + 1}), None)
    assert time.monotonic() - started < 2.0  # never waited on the database
    assert store.backlog == 100 and store.rows_dropped == 0
    server.start()
    await asyncio.wait_for(store.flush(), 30)
    assert await count_rows(store.url) == 50 and store.write_errors == 0
    async with store.session("s") as held:  # the state kept in memory was not lost...
        assert held.state.get("n") == 51
        await held.save(SessionState({"n": 52}), None)
    other = PostgresStore(store.url)  # ...and is stored once the database answers
    await other.open()
    try:
        assert (await other.load_state("s"))[0].get("n") == 52
    finally:
        await other.close()


async def test_beyond_the_buffer_rows_are_dropped_and_counted(
    pg: tuple[PgServer, PostgresStore], caplog: pytest.LogCaptureFixture
) -> None:
    server, store = pg
    server.stop()
    for i in range(250):
        await store.insert_request({"id": f"r{i}", "created_at": float(i)})
    assert store.backlog == 200 and store.rows_dropped == 50
    assert "dropping new ones" in caplog.text
    server.start()
    await asyncio.wait_for(store.flush(), 30)
    assert await count_rows(store.url) == 200


def _processes(server: PgServer) -> list[int]:
    """The server's processes: the postmaster (its pid file's first line) and its children."""
    import subprocess

    main = int((server.data / "postmaster.pid").read_text().split()[0])
    children = subprocess.run(["pgrep", "-P", str(main)], capture_output=True, text=True)
    return [main, *(int(p) for p in children.stdout.split())]


async def test_a_database_that_stops_answering_holds_no_request(
    own_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Frozen with its connections open (a frozen host, a failover without a reset): a request
    holding a pooled connection waited for the hold's answer with no end. Now its statement is
    given up past the lock timeout and a margin, and the store serves from memory."""
    import os
    import signal

    import proxy.store.postgres as pg_store

    monkeypatch.setattr(pg_store, "STATEMENT_MARGIN_S", 0.5)
    store = PostgresStore(own_server.database(), lock_timeout_s=0.5, batch_window_s=0.005)
    await store.open()
    frozen: list[int] = []
    try:
        async with store.session("s") as held:  # a pooled connection, idle and open
            await held.save(SessionState({"n": 1}), None)
        frozen = _processes(own_server)
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        async with store.session("s") as held:
            await held.save(SessionState({"n": held.state.get("n") + 1}), None)
        assert time.monotonic() - started < 5.0  # the statement's bound: 1 s, then offline
        # (its turn waits one lock timeout behind the save before: read-only, on what it saves)
        assert held.read_only and held.state.get("n") == 1
        await store.settled("s")  # that save gives up past the statement's bound
        started = time.monotonic()
        async with store.session("t") as held:  # the next is offline at once
            assert held.state.get("n") is None
        assert time.monotonic() - started < 0.5
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        await store.close()


async def test_a_sub_agents_ancestors_are_read_from_memory_while_the_database_is_away(
    pg: tuple[PgServer, PostgresStore],
) -> None:
    """A count reads a session's ancestors without holding it: while the database was away
    that read still took a connection, and its error went up to the client."""
    server, store = pg
    async with store.session("parent") as held:
        await held.save(SessionState({"n": 1}), None)
    async with store.session("child") as held:
        await held.save(SessionState({"m": 1}), "parent")
    await store.flush()
    server.stop()
    for _ in range(2):  # found away by the read itself, then known away
        _, parent = await store.load_state("child")
        assert parent == "parent"
        (ancestor,) = await store.ancestors(parent)
        assert (ancestor.session_id, ancestor.state.get("n")) == ("parent", 1)
    assert store.health.away()


async def test_ancestors_wait_for_a_full_pool_no_longer_than_a_hold(own_server: PgServer) -> None:
    store = PostgresStore(own_server.database(), pool_size=1, batch_window_s=0.0,
                          lock_timeout_s=0.3)  # fmt: skip
    await store.open()
    try:
        async with store.session("parent") as held:
            await held.save(SessionState({"n": 1}), None)
        await store.flush()
        async with store.session("busy"):  # the pool's one connection
            async with asyncio.timeout(1.0):
                (ancestor,) = await store.ancestors("parent")
        assert ancestor.state.get("n") == 1 and not store.health.away()
    finally:
        await store.close()
