"""SQLite store (aiosqlite): session state and the request log. One connection owns all writes
(WAL, busy timeout); a second one serves reads. Session state is cached in memory (write-through),
so a request in a known session costs no read."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiosqlite
import orjson

from proxy.migrations import apply_migrations
from rules.base import Ancestor, SessionState

JSON_COLUMNS = ("sections", "report", "usage")
MAX_ANCESTOR_DEPTH = 3
WRITE_ATTEMPTS = 4
log = logging.getLogger("ctxproxy.store")


class Store:
    def __init__(self, path: str, state_cache_size: int = 2_000) -> None:
        self.path = path
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._states: OrderedDict[str, tuple[SessionState, str | None]] = OrderedDict()
        self._cache_size = state_cache_size
        self.write_errors = 0
        # Thunks that build (sql, params): JSON encoding happens in the writer task, while the
        # request that queued it is already waiting on its upstream.
        self._queue: asyncio.Queue[Callable[[], tuple[str, tuple[Any, ...]]] | None] = (
            asyncio.Queue()
        )
        self._writer_task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._writer = await aiosqlite.connect(self.path)
        await self._writer.execute("PRAGMA journal_mode=WAL")
        await self._writer.execute("PRAGMA synchronous=NORMAL")
        await self._writer.execute("PRAGMA busy_timeout=2000")
        await apply_migrations(self._writer)
        if self.path == ":memory:":
            self._reader = self._writer
        else:
            self._reader = await aiosqlite.connect(self.path)
            await self._reader.execute("PRAGMA busy_timeout=5000")
        self._reader.row_factory = aiosqlite.Row
        self._writer_task = asyncio.create_task(self._write_loop())

    async def close(self) -> None:
        if self._writer_task is not None:
            await self._queue.put(None)
            await self._writer_task
            self._writer_task = None
        if self._reader is not None and self._reader is not self._writer:
            await self._reader.close()
        if self._writer is not None:
            await self._writer.close()
        self._writer = self._reader = None

    @property
    def writer(self) -> aiosqlite.Connection:
        assert self._writer is not None, "store is not open"
        return self._writer

    @property
    def reader(self) -> aiosqlite.Connection:
        assert self._reader is not None, "store is not open"
        return self._reader

    async def _write(self, build: Callable[[], tuple[str, tuple[Any, ...]]]) -> None:
        """Queue a write for the single writer task: ordered, batched into one commit, and off the
        request's critical path. ``flush`` waits until everything queued is committed."""
        self._queue.put_nowait(build)

    async def flush(self) -> None:
        await self._queue.join()

    async def _write_loop(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while not self._queue.empty() and len(batch) < 200:
                batch.append(self._queue.get_nowait())
            stop = None in batch
            await self._write_batch([item for item in batch if item is not None])
            for _ in batch:
                self._queue.task_done()
            if stop:
                return

    async def _write_batch(self, batch: list[Callable[[], tuple[str, tuple[Any, ...]]]]) -> None:
        """Write a batch in one transaction; while the database is locked by someone else, retry
        the whole batch a few times before counting its rows as lost."""
        statements = []
        for build in batch:
            try:
                statements.append(build())
            except (TypeError, ValueError):  # a value that cannot be encoded: that row is lost
                self.write_errors += 1
        for attempt in range(WRITE_ATTEMPTS):
            failed = 0
            try:
                for sql, params in statements:
                    try:
                        await self.writer.execute(sql, params)
                    except aiosqlite.IntegrityError:
                        failed += 1
                await self.writer.commit()
                self.write_errors += failed
                return
            except aiosqlite.OperationalError:  # "database is locked" past busy_timeout
                with contextlib.suppress(aiosqlite.Error):
                    await self.writer.rollback()
                if attempt + 1 < WRITE_ATTEMPTS:
                    await asyncio.sleep(0.2 * (attempt + 1))
        log.error("store: %d writes lost, the database stayed locked", len(statements))
        self.write_errors += len(statements)

    # ----- sessions -----

    async def load_state(self, session_id: str) -> tuple[SessionState, str | None]:
        """(state, parent id) of a session; an empty state for a session never seen."""
        cached = self._states.get(session_id)
        if cached is not None:
            self._states.move_to_end(session_id)
            return cached
        # The reader: a lookup must not queue behind the writer's backlog or its lock waits.
        async with self.reader.execute(
            "SELECT state, parent_id FROM sessions WHERE id = ?", (session_id,)
        ) as cur:
            row = await cur.fetchone()
        found = (SessionState(orjson.loads(row[0])), row[1]) if row else (SessionState(), None)
        self._remember(session_id, found)
        return found

    def _remember(self, session_id: str, value: tuple[SessionState, str | None]) -> None:
        self._states[session_id] = value
        self._states.move_to_end(session_id)
        while len(self._states) > self._cache_size:
            self._states.popitem(last=False)

    async def save_state(self, session_id: str, state: SessionState, parent_id: str | None) -> None:
        now = time.time()
        self._remember(session_id, (state, parent_id))
        await self._write(
            lambda: (
                "INSERT INTO sessions (id, parent_id, created_at, updated_at, state) "
                "VALUES (?,?,?,?,?) "
                "ON CONFLICT(id) DO UPDATE SET state=excluded.state, "
                "updated_at=excluded.updated_at, "
                "parent_id=COALESCE(excluded.parent_id, sessions.parent_id)",
                (session_id, parent_id, now, now, orjson.dumps(state.to_json()).decode()),
            )
        )

    async def ancestors(
        self, parent_id: str | None, depth: int = MAX_ANCESTOR_DEPTH
    ) -> list[Ancestor]:
        """Up to ``depth`` ancestor sessions, nearest first, stopping at cycles."""
        out: list[Ancestor] = []
        seen: set[str] = set()
        current = parent_id
        while current and len(out) < depth and current not in seen:
            seen.add(current)
            state, next_parent = await self.load_state(current)
            out.append(Ancestor(current, state, len(out) + 1))
            current = next_parent
        return out

    # ----- request log -----

    async def insert_request(self, row: dict[str, Any]) -> None:
        snapshot = dict(row)  # the caller goes on updating its row

        def build() -> tuple[str, tuple[Any, ...]]:
            encoded = _encode_json_columns(snapshot)
            cols = ", ".join(encoded)
            marks = ", ".join("?" for _ in encoded)
            return f"INSERT INTO requests ({cols}) VALUES ({marks})", tuple(encoded.values())

        await self._write(build)

    async def finish_request(self, request_id: str, fields: dict[str, Any]) -> None:
        snapshot = dict(fields)

        def build() -> tuple[str, tuple[Any, ...]]:
            encoded = _encode_json_columns(snapshot)
            sets = ", ".join(f"{k} = ?" for k in encoded)
            return f"UPDATE requests SET {sets} WHERE id = ?", (*encoded.values(), request_id)

        await self._write(build)

    async def get_request(self, request_id: str) -> dict[str, Any] | None:
        async with self.reader.execute("SELECT * FROM requests WHERE id = ?", (request_id,)) as cur:
            row = await cur.fetchone()
        return _decode_row(row) if row else None

    async def list_requests(
        self,
        session: str | None = None,
        model: str | None = None,
        status: int | None = None,
        limit: int = 50,
        after_created: float | None = None,
    ) -> list[dict[str, Any]]:
        where, params = [], []
        for column, value in (("session_id", session), ("model", model), ("status", status)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if after_created is not None:
            where.append("created_at > ?")
            params.append(after_created)
        sql = "SELECT * FROM requests"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC LIMIT ?"
        params.append(limit)
        async with self.reader.execute(sql, params) as cur:
            rows = await cur.fetchall()
        return [_decode_row(r) for r in rows]

    async def list_sessions(self, limit: int = 100) -> list[dict[str, Any]]:
        sql = (
            "SELECT session_id, COUNT(*) AS requests, MAX(created_at) AS last_seen, "
            "MIN(created_at) AS first_seen, SUM(tokens_before) AS tokens_before, "
            "SUM(tokens_after) AS tokens_after FROM requests WHERE session_id IS NOT NULL "
            "GROUP BY session_id ORDER BY last_seen DESC LIMIT ?"
        )
        async with self.reader.execute(sql, (limit,)) as cur:
            rows = await cur.fetchall()
        return [dict(r) for r in rows]


def _encode_json_columns(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for col in JSON_COLUMNS:
        if col in out and out[col] is not None and not isinstance(out[col], str):
            out[col] = orjson.dumps(out[col]).decode()
    return out


def _decode_row(row: aiosqlite.Row) -> dict[str, Any]:
    out = dict(row)
    for col in JSON_COLUMNS:
        if isinstance(out.get(col), str):
            out[col] = orjson.loads(out[col])
    return out
