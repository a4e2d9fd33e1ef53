"""The SQLite store's reads of the request log (``ctxproxy logs`` / ``show``, ``/ui``), on a
connection of their own (``views``): they never wait behind the writer, and a request's own reads
(``fetchrow``: a response id, a cache report, the readiness probe; a session's state) never wait
behind them on the ``reader`` (a page's filter by model or status scans the log: 0.7 s over
400,000 rows, seconds over a busy month, and a ``previous_response_id`` looked up meanwhile was
refused with a 503 past 2 s, and so was ``/readyz``)."""

from __future__ import annotations

from typing import Any

import aiosqlite

from proxy.store.batch import decode_row as _decode_row
from proxy.store.batch import decode_rows
from proxy.store.dialect import SQLITE


class SqliteReads:
    """The reads of ``proxy.store.base.Store`` for ``SQLiteStore``: the views' on ``views``, a
    request's own (``fetchrow``) on ``reader``."""

    _reader: aiosqlite.Connection | None  # opened by SQLiteStore
    _views: aiosqlite.Connection | None

    @property
    def reader(self) -> aiosqlite.Connection:
        assert self._reader is not None, "store is not open"
        return self._reader

    @property
    def views(self) -> aiosqlite.Connection:
        assert self._views is not None, "store is not open"
        return self._views

    async def fetchrow(self, sql: str, params: tuple[Any, ...]) -> Any:
        async with self.reader.execute(sql, params) as cur:
            return await cur.fetchone()

    async def fetchall(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """Rows of a view's read (``views``)."""
        return await self._fetch(sql, params)

    async def get_request(self, request_id: str) -> dict[str, Any] | None:
        rows = await self._fetch(SQLITE.get_request, (request_id,))
        return _decode_row(rows[0]) if rows else None

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
        sql, params = SQLITE.list_requests(
            session, model, status, limit, after_created, principal, bodies
        )
        return await decode_rows(await self._fetch(sql, params))

    async def list_sessions(self, limit: int = 100) -> list[dict[str, Any]]:
        return [dict(r) for r in await self._fetch(SQLITE.list_sessions, (limit,))]

    async def recent_sessions(
        self, scan: int, limit: int, principal: str | None = None
    ) -> list[dict[str, Any]]:
        """Sessions seen in the latest ``scan`` requests, with totals; two indexed queries."""
        sql, params = SQLITE.recent_session_ids(scan, limit, principal)
        ids = [r[0] for r in await self._fetch(sql, params)]
        if not ids:
            return []
        sql, _ = SQLITE.session_totals(len(ids))
        return [dict(r) for r in await self._fetch(sql, ids)]

    async def _fetch(self, sql: str, params: Any) -> list[aiosqlite.Row]:
        async with self.views.execute(sql, params) as cur:
            return list(await cur.fetchall())


async def reading(path: str) -> aiosqlite.Connection:
    """A connection to ``path`` for reads."""
    conn = await aiosqlite.connect(path)
    await conn.execute("PRAGMA busy_timeout=5000")
    return conn
