"""The request log's writer on PostgreSQL, one ``executemany`` per statement shape (each atomic,
no batch-wide transaction): a row the database refuses is still the only one lost, a retry after
the connection failed writes only what was not written yet; and a batch runs only the newest of
a row's keyed upserts (a session's cache report)."""

from __future__ import annotations

from typing import Any

from proxy.store.batch import Statement, statements
from proxy.store.dialect import POSTGRES
from proxy.store.pg_writer import Health, PgWriter
from proxy.store.postgres import PostgresStore
from tests.support.postgres import PgServer, count


def test_a_batch_runs_only_the_newest_of_a_rows_keyed_upserts() -> None:
    ops = [
        Statement("UPSERT", ("s", 2.0), key="s", order=2.0),
        Statement("OTHER", ("x",)),
        Statement("UPSERT", ("t", 1.0), key="t", order=1.0),
        Statement("UPSERT", ("s", 1.0), key="s", order=1.0),  # older, queued later
        Statement("UPSERT", ("s", 3.0), key="s", order=3.0),
        Statement("OTHER", ("y",)),
    ]
    groups, lost = statements(ops, POSTGRES)
    assert lost == 0
    assert groups == [("UPSERT", [("s", 3.0), ("t", 1.0)]), ("OTHER", [("x",), ("y",)])]


async def test_one_bad_row_is_the_only_one_lost(pg_server: PgServer) -> None:
    url = pg_server.database()
    store = PostgresStore(url, batch_window_s=0.01)
    await store.open()
    try:
        await store.insert_request({"id": "dup", "created_at": 1.0})
        await store.flush()
        await store.insert_request({"id": "dup", "created_at": 2.0})  # primary key taken
        await store.insert_request({"id": "ok", "created_at": 3.0})
        await store.finish_request("earlier", {"status": 201})  # another shape, same batch
        await store.finish_request("ok", {"status": 200})
        await store.flush()
        assert store.write_errors == 1
        assert (await store.get_request("ok"))["status"] == 200
        assert (await store.get_request("dup"))["created_at"] == 1.0
        assert await count(url, "SELECT count(*) FROM requests") == 2
    finally:
        await store.close()


class FlakyConnection:
    """Runs the statements on a real connection; the second ``executemany`` fails once as if
    the connection had dropped."""

    def __init__(self, real: Any) -> None:
        self.real, self.calls = real, 0

    async def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        self.calls += 1
        if self.calls == 2:
            raise ConnectionResetError("dropped")
        await self.real.executemany(sql, rows)


async def test_a_retry_writes_only_what_was_not_written(pg_server: PgServer) -> None:
    url = pg_server.database()
    store = PostgresStore(url)
    await store.open()
    pool = store._pool
    flaky: list[FlakyConnection] = []

    class Acquire:
        async def __aenter__(self) -> FlakyConnection:
            self.conn = await pool.take()
            if not flaky:
                flaky.append(FlakyConnection(self.conn))
            flaky[0].real = self.conn
            return flaky[0]

        async def __aexit__(self, *exc: object) -> None:
            pool.give(self.conn)

    class Pool:
        def acquire(self, timeout: float | None = None) -> Acquire:
            return Acquire()

    writer = PgWriter(Pool(), Health(), buffer_rows=100, batch_window_s=0)
    try:
        groups = [
            (POSTGRES.insert_request(("id", "created_at")), [("a", 1.0), ("b", 2.0)]),
            (POSTGRES.update_request(("status",)), [(200, "a")]),
        ]
        await writer._write_retrying(groups)
        assert writer.write_errors == 0 and flaky[0].calls == 3  # insert, update failed, update
        assert await count(url, "SELECT count(*) FROM requests") == 2  # not inserted twice
        assert await count(url, "SELECT count(*) FROM requests WHERE status = 200") == 1
    finally:
        await store.close()


async def test_a_sessions_cache_report_reaches_other_replicas_while_requests_are_in_flight(
    pg_server: PgServer,
) -> None:
    """On PostgreSQL a session's state is saved when it is let go and another replica reads the
    cache report with it: the report is not held for a lull (a busy replica may have none)."""
    import asyncio

    from proxy.store.cache_feedback import CacheFeedback
    from proxy.store.lull import MAX_DEFER_S

    store = PostgresStore(pg_server.database(), batch_window_s=0.01)
    await store.open()
    try:
        store.lull.started()  # another session's request is being handled on this replica
        store.cache_feedback.put("s1", CacheFeedback(1.0, 100, 80, 0))
        await asyncio.sleep(MAX_DEFER_S / 2)
        row = await store.fetchrow(store.dialect.feedback_select, ("s1",))
        assert row is not None and tuple(row[1:3]) == (100, 80)
        store.lull.finished({})
    finally:
        await store.close()
