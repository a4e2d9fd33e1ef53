"""On PostgreSQL the inspection views' reads (``/ui``'s pages, whose filters by model or status
scan the request log) took pooled connections without bound, as many as pages were loading at
once: a few slow pages (an auto-refreshing dashboard, a team sharing ``ui.public``) held the pool
every request's session hold needs, and the requests waited (past ``lock_timeout_s`` they are
served read-only, their state unsaved). The views now take a quarter of the pool at most."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from proxy.store.postgres import PostgresStore

SLOW = "SELECT pg_sleep(1.2)"  # a stand-in for a page's scan of a large log


async def test_slow_pages_leave_the_pool_to_the_requests(pg_server: Any) -> None:
    store = PostgresStore(pg_server.database(), pool_size=4, lock_timeout_s=5.0)
    await store.open()
    try:
        pages = [asyncio.create_task(store.fetchall(SLOW, ())) for _ in range(4)]
        await asyncio.sleep(0.2)  # the pages' reads are under way
        started = time.monotonic()
        await store.load_state("alice/conv")  # a request's hold
        took = time.monotonic() - started
        await asyncio.gather(*pages)
        assert took < 0.5, f"the request's hold waited {took:.2f} s for a connection"
    finally:
        await store.close()
