"""The PostgreSQL store's statements on its pool that hold no session: the request log's reads
(``ctxproxy logs`` / ``show``, ``/ui``, ``/metrics``), the readiness ping, and the retention
prune's bounded steps."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from proxy.store import pg_queries as q
from proxy.store.batch import decode_row, decode_rows
from proxy.store.dialect import POSTGRES


class PgReads:
    """The reads of ``proxy.store.base.Store`` for ``PostgresStore`` (its pool: ``_pool``). The
    views' reads (``fetchall`` and the request log's) take at most a quarter of the pool at once
    (``_views``): a page's filter by model or status scans the log, and a few slow pages loading
    together held every connection the requests' session holds need."""

    _pool: Any  # Connections, once open
    pool_size: int
    _views_slots: asyncio.Semaphore | None = None

    @contextlib.asynccontextmanager
    async def _views(self) -> AsyncIterator[None]:
        if self._views_slots is None:  # made on the loop that reads
            self._views_slots = asyncio.Semaphore(max(1, self.pool_size // 4))
        async with self._views_slots:
            yield

    async def fetchrow(self, sql: str, params: tuple[Any, ...]) -> Any:
        """A request's own read (a response id, a cache report, the readiness probe)."""
        return await self._pool.fetchrow(sql, *params)

    async def fetchall(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """Rows of a view's read."""
        async with self._views():
            return list(await self._pool.fetch(sql, *params))

    async def get_request(self, request_id: str) -> dict[str, Any] | None:
        async with self._views():
            row = await self._pool.fetchrow(POSTGRES.get_request, request_id)
        return decode_row(row) if row else None

    async def list_requests(
        self,
        session: str | None = None,
        model: str | None = None,
        status: int | None = None,
        limit: int = 50,
        after_created: float | None = None,
        principal: str | None = None,
        bodies: bool = True,
    ) -> list[dict[str, Any]]:
        sql, params = POSTGRES.list_requests(
            session, model, status, limit, after_created, principal, bodies
        )
        async with self._views():
            rows = await self._pool.fetch(sql, *params)
        return await decode_rows(rows)

    async def list_sessions(self, limit: int = 100) -> list[dict[str, Any]]:
        async with self._views():
            return [dict(r) for r in await self._pool.fetch(POSTGRES.list_sessions, limit)]

    async def recent_sessions(
        self, scan: int, limit: int, principal: str | None = None
    ) -> list[dict[str, Any]]:
        sql, params = POSTGRES.recent_session_ids(scan, limit, principal)
        async with self._views():
            ids = [r[0] for r in await self._pool.fetch(sql, *params)]
            if not ids:
                return []
            sql, _ = POSTGRES.session_totals(len(ids))
            return [dict(r) for r in await self._pool.fetch(sql, ids)]

    async def ping(self) -> bool:
        try:
            async with asyncio.timeout(2.0):
                return bool(await self._pool.fetchval("SELECT 1") == 1)
        except Exception:
            return False


async def prune_rows(
    pool: Any, older_than: float, idle_before: float
) -> tuple[dict[str, int], list[str]]:
    """Delete request rows created before ``older_than`` and sessions (with their cache report)
    not saved since ``idle_before``, ``q.STEP_ROWS`` at a time, one short transaction each,
    pausing between steps: requests are never held up behind it. The counts, and the sessions
    deleted."""
    counts = {"requests": 0, "sessions": 0, "session_cache": 0}
    gone: list[str] = []
    counts["requests"] = await _steps(pool, q.PRUNE_REQUESTS, older_than)
    counts["response_ids"] = await _steps(pool, q.PRUNE_RESPONSE_IDS, older_than)
    after: str | None = ""
    while idle_before > 0 and after is not None:  # the sessions, by key, a step at a time
        row = await pool.fetchrow(q.PRUNE_SESSIONS, idle_before, after, q.STEP_ROWS)
        after = row["last"]
        gone += row["gone"]
        counts["session_cache"] += row["cached"]
        if after is not None:
            await asyncio.sleep(q.STEP_PAUSE_S)
    counts["sessions"] = len(gone)
    counts["session_cache"] += await _steps(pool, q.PRUNE_ORPHAN_CACHE, idle_before)
    return counts, gone


async def _steps(pool: Any, sql: str, cutoff: float) -> int:
    """``sql`` run until it deletes fewer than ``q.STEP_ROWS``: the rows deleted."""
    deleted = 0
    while cutoff > 0:
        rows = await pool.fetch(sql, cutoff, q.STEP_ROWS)
        deleted += len(rows)
        if len(rows) < q.STEP_ROWS:
            break
        await asyncio.sleep(q.STEP_PAUSE_S)
    return deleted
