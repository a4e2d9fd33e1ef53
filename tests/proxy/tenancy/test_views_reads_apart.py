"""On SQLite the inspection views' reads (``/ui``'s pages: a filter by model or status scans the
request log, 0.7 s over 400,000 rows, seconds over a month of a busy gateway's) ran on the one
reader connection every request's own reads queue on: a session's state not cached, a
``previous_response_id`` looked up (refused with a 503 past 2 s), a cache report, and the
readiness probe (503 past 2 s: the replica taken out of service). They now have a connection of
their own: a request's read goes while a page's scan runs."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from proxy.server.response_ids import ResponseIds
from proxy.store.sqlite import SQLiteStore
from proxy.telemetry.health import not_ready
from rules.base import SessionState

# a stand-in for a page's scan of a large log: a read that takes a few seconds of SQLite's time
SCAN = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 6000000) "
    "SELECT count(*) FROM c"
)


async def test_a_requests_reads_do_not_wait_for_a_pages_scan(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "log.db"), batch_window_s=0.001, state_cache_size=1)
    await store.open()
    try:
        ResponseIds(store).note("alice", "resp_1", time.time())
        await store.save_state("alice/conv", SessionState({"turn": 1}), None)
        # the state cache holds one session: conv's state is read from the table
        await store.save_state("alice/other", SessionState({"turn": 1}), None)
        await store.flush()
        scan = asyncio.create_task(store.fetchall(SCAN, ()))
        await asyncio.sleep(0.2)  # the scan is under way
        state, _ = await store.load_state("alice/conv")
        assert state.get("turn") == 1
        assert await ResponseIds(store).known("alice", "resp_1", time.time())  # from the table
        assert await not_ready(store) is None
        assert not scan.done(), "the request's reads waited for the page's scan"
        assert (await scan)[0][0] == 6_000_000
    finally:
        await store.close()
