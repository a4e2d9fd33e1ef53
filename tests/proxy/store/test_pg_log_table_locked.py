"""A lock on the request-log table alone (an operator's ``ALTER``, ``VACUUM FULL`` or ``REINDEX``
of the log) is not the database away: the log writer's timed-out batch marked the whole store
unreachable, and requests in the window it opened kept their session state in memory only.
Now the writer asks the database a trivial query first; it answers, and the store stays up."""

from __future__ import annotations

import asyncio

import asyncpg

from proxy.store.postgres import PostgresStore
from tests.support.postgres import PgServer


async def test_a_locked_log_table_leaves_the_store_up(pg_server: PgServer) -> None:
    url = pg_server.database()
    store = PostgresStore(url, lock_timeout_s=0.2, batch_window_s=0.01)
    await store.open()
    locker = await asyncpg.connect(url)
    try:
        await store.insert_request({"id": "before", "created_at": 1.0})
        await store.flush()
        lock = locker.transaction()
        await lock.start()
        await locker.execute("LOCK TABLE requests IN ACCESS EXCLUSIVE MODE")
        await store.insert_request({"id": "held", "created_at": 2.0})
        await asyncio.sleep(7.0)  # past the writer's statement timeout (lock_timeout + 5 s)
        assert store.health.down_since is None, "the store was taken for away"
        async with store.session("alice/s1") as held:  # the sessions' path: not skipped
            assert not getattr(held, "read_only", False)
        await lock.rollback()
        await store.flush()
        assert (await store.get_request("held")) is not None  # written once the lock went
    finally:
        await locker.close()
        await store.close()
