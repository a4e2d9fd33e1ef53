"""PostgreSQL going away under the store (its own server: these tests stop it). Nothing waits on
it: a session is served from memory and its new state kept there, log rows stay queued up to
the bound, then are dropped and counted; when the database is back the backlog is written and
the state kept in memory is saved (unless another replica saved the session meanwhile)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from proxy.store.postgres import PostgresStore
from rules.base import SessionState
from tests.support.postgres import PgServer, count, start_server, unavailable


@pytest.fixture(scope="module")
def own_server() -> Iterator[PgServer]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    server = start_server()
    yield server
    server.destroy()


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
