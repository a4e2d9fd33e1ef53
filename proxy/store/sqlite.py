"""SQLite store (aiosqlite): session state and the request log. One connection owns all writes
(WAL, busy timeout); a second one serves reads. Session state is cached in memory (write-through),
so a request in a known session costs no read."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite
import orjson

from proxy.store.cache_feedback import FeedbackStore
from proxy.store.migrations import apply_migrations
from rules.base import Ancestor, SessionState
from rules.redact import redact, redact_text

JSON_COLUMNS = ("sections", "report", "usage")
# Columns holding client text as it came (the rest are numbers, ours, or redacted at the source).
CLIENT_TEXT_COLUMNS = ("model", "path")
MAX_ANCESTOR_DEPTH = 3
WRITE_ATTEMPTS = 4
# Rows reach the database at most this long after they were queued (a crash loses at most that);
# batching them saves a commit and two thread hops per request.
BATCH_WINDOW_S = 0.02
MAX_BATCH = 500
# What one row can raise (a taken primary key, a value SQLite cannot hold): that row is lost, the
# others are written. OperationalError (a locked database) is not among them: it is retried.
_ROW_ERRORS = (
    sqlite3.IntegrityError,
    sqlite3.InterfaceError,
    sqlite3.ProgrammingError,
    sqlite3.DataError,
    OverflowError,
    TypeError,
    ValueError,
)
log = logging.getLogger("ctxproxy.store")


class Store:
    def __init__(
        self, path: str, state_cache_size: int = 2_000, batch_window_s: float = BATCH_WINDOW_S
    ) -> None:
        self.path = path
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._states: OrderedDict[str, tuple[SessionState, str | None]] = OrderedDict()
        self._cache_size = state_cache_size
        self.write_errors = 0
        # Writes as data: JSON encoding happens in the writer task, after the request that
        # queued them has been answered.
        self._queue: asyncio.Queue[_Op | None] = asyncio.Queue()
        self.batch_window_s = batch_window_s
        # The latest queued save per session, until written: the cache may evict it first.
        self._unwritten: dict[str, _SaveState] = {}
        self._writer_task: asyncio.Task[None] | None = None
        # the upstream's cache report per session (proxy.store.cache_feedback)
        self.cache_feedback = FeedbackStore(self)

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

    def _enqueue(self, op: _Op) -> None:
        """Queue a write for the single writer task: off the request's critical path, ordered,
        coalesced and committed in batches. ``flush`` waits until everything queued is written."""
        self._queue.put_nowait(op)

    def write_later(self, sql: str, params: tuple[Any, ...]) -> None:
        """Queue one statement of ours (fixed SQL, bound values) for the writer task, written in
        the next batch after the request log and session rows."""
        self._enqueue(_Statement(sql, params))

    async def flush(self) -> None:
        await self._queue.join()

    async def _write_loop(self) -> None:
        while True:
            batch: list[_Op | None] = [await self._queue.get()]
            if self.batch_window_s and batch[0] is not None:
                # gather what the next few ms bring: a request's insert, its finish and its
                # session's state then land in one statement each, and one commit serves all
                await asyncio.sleep(self.batch_window_s)
            while not self._queue.empty() and len(batch) < MAX_BATCH:
                batch.append(self._queue.get_nowait())
            stop = None in batch
            ops = [op for op in batch if op is not None]
            try:
                await self._write_batch(ops)
            except Exception:  # never let one batch stop the writer: later rows still land
                log.exception("store: a batch of %d writes failed", len(ops))
                self.write_errors += len(ops)
            finally:
                for op in ops:
                    if isinstance(op, _SaveState) and self._unwritten.get(op.session_id) is op:
                        del self._unwritten[op.session_id]
                for _ in batch:
                    self._queue.task_done()
            if stop:
                return

    async def _write_batch(self, ops: list[_Op]) -> None:
        """Write a batch in one transaction, one statement per shape; if a row breaks (a
        constraint, a value SQLite refuses), the batch is redone row by row so only that row is
        lost. While the database is locked by someone else, retry a few times first."""
        groups, lost = _statements(ops)
        self.write_errors += lost
        if not groups:
            return
        for attempt in range(WRITE_ATTEMPTS):
            try:
                try:
                    for sql, rows in groups:
                        await self.writer.executemany(sql, rows)
                    failed = 0
                except _ROW_ERRORS:
                    await self.writer.rollback()
                    failed = await self._write_rows(groups)
                await self.writer.commit()
                self.write_errors += failed
                return
            except aiosqlite.OperationalError:  # "database is locked" past busy_timeout
                with contextlib.suppress(aiosqlite.Error):
                    await self.writer.rollback()
                if attempt + 1 < WRITE_ATTEMPTS:
                    await asyncio.sleep(0.2 * (attempt + 1))
        count = sum(len(rows) for _, rows in groups)
        log.error("store: %d writes lost, the database stayed locked", count)
        self.write_errors += count

    async def _write_rows(self, groups: list[tuple[str, list[tuple[Any, ...]]]]) -> int:
        """The slow path: each row on its own; returns how many could not be written."""
        failed = 0
        for sql, rows in groups:
            for params in rows:
                try:
                    await self.writer.execute(sql, params)
                except _ROW_ERRORS:
                    failed += 1
        return failed

    # ----- sessions -----

    async def load_state(self, session_id: str) -> tuple[SessionState, str | None]:
        """(state, parent id) of a session; an empty state for a session never seen."""
        cached = self._states.get(session_id)
        if cached is not None:
            self._states.move_to_end(session_id)
            return cached
        queued = self._unwritten.get(session_id)
        if queued is not None:  # evicted from the cache while its save waits for the writer
            found = (queued.state, queued.parent_id)
            self._remember(session_id, found)
            return found
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
        op = _SaveState(session_id, state, parent_id, now, now)
        self._unwritten[session_id] = op
        self._enqueue(op)

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
        self._enqueue(_Insert(dict(row)))  # a copy: the caller goes on updating its row

    async def finish_request(self, request_id: str, fields: dict[str, Any]) -> None:
        self._enqueue(_Finish(request_id, dict(fields)))

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


@dataclass(frozen=True)
class _Insert:
    row: dict[str, Any]


@dataclass(frozen=True)
class _Finish:
    request_id: str
    fields: dict[str, Any]


@dataclass(frozen=True)
class _SaveState:
    session_id: str
    state: SessionState
    parent_id: str | None
    at: float
    since: float  # the first of the saves coalesced into this one (a new row's created_at)


@dataclass(frozen=True)
class _Statement:
    sql: str
    params: tuple[Any, ...]


_Op = _Insert | _Finish | _SaveState | _Statement

_UPSERT_SESSION = (
    "INSERT INTO sessions (id, parent_id, created_at, updated_at, state) VALUES (?,?,?,?,?) "
    "ON CONFLICT(id) DO UPDATE SET state=excluded.state, updated_at=excluded.updated_at, "
    "parent_id=COALESCE(excluded.parent_id, sessions.parent_id)"
)


def _statements(ops: list[_Op]) -> tuple[list[tuple[str, list[tuple[Any, ...]]]], int]:
    """A batch as few statements as it takes, in an order that keeps its meaning: a request
    inserted and finished in the same batch is one INSERT; only the last state of a session is
    written. Returns (sql, rows) groups and the number of rows that could not be encoded."""
    inserts: dict[str, dict[str, Any]] = {}
    finishes: dict[str, dict[str, Any]] = {}
    states: dict[str, _SaveState] = {}
    statements: list[_Statement] = []
    for op in ops:
        if isinstance(op, _Statement):
            statements.append(op)
        elif isinstance(op, _Insert):
            inserts[op.row["id"]] = op.row
        elif isinstance(op, _Finish):
            target = inserts.get(op.request_id)
            if target is not None:
                target.update(op.fields)
            else:
                finishes.setdefault(op.request_id, {}).update(op.fields)
        else:
            earlier = states.pop(op.session_id, None)
            if earlier is not None:
                parent = op.parent_id if op.parent_id is not None else earlier.parent_id
                op = _SaveState(op.session_id, op.state, parent, op.at, earlier.since)
            states[op.session_id] = op
    groups: dict[str, list[tuple[Any, ...]]] = {}
    lost = 0
    for row in inserts.values():
        try:
            encoded = _encode_json_columns(row)
        except (TypeError, ValueError):  # a value that cannot be encoded: that row is lost
            lost += 1
            continue
        cols = ", ".join(encoded)
        marks = ", ".join("?" * len(encoded))
        groups.setdefault(f"INSERT INTO requests ({cols}) VALUES ({marks})", []).append(
            tuple(encoded.values())
        )
    for request_id, fields in finishes.items():
        try:
            encoded = _encode_json_columns(fields)
        except (TypeError, ValueError):
            lost += 1
            continue
        sets = ", ".join(f"{k} = ?" for k in encoded)
        groups.setdefault(f"UPDATE requests SET {sets} WHERE id = ?", []).append(
            (*encoded.values(), request_id)
        )
    for op in states.values():
        try:
            blob = orjson.dumps(op.state.to_json()).decode()
        except (TypeError, ValueError):
            lost += 1
            continue
        groups.setdefault(_UPSERT_SESSION, []).append(
            (op.session_id, op.parent_id, op.since, op.at, blob)
        )
    for statement in statements:  # in the order queued
        groups.setdefault(statement.sql, []).append(statement.params)
    return list(groups.items()), lost


def _encode_json_columns(row: dict[str, Any]) -> dict[str, Any]:
    """The row as stored: client text redacted (here, in the writer task, off the request's
    path), JSON columns encoded."""
    out = dict(row)
    for col in CLIENT_TEXT_COLUMNS:
        if isinstance(out.get(col), str):
            out[col] = redact_text(out[col])
    if isinstance(out.get("report"), dict):  # rules copy client text into their fragments
        out["report"] = redact(out["report"])
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
