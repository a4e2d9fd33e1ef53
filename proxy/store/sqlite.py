"""SQLite store (aiosqlite): session state and the request log, for one process (a sidecar). One
connection owns all writes (WAL, busy timeout; the writer task and its queue: ``sqlite_writes``); a
second one serves reads. Session state is cached in memory (write-through), so a request in a known
session costs no read; a session's requests take turns on an in-process lock (``session``). The
interface: ``proxy.store.base.Store``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import aiosqlite
import orjson

from proxy.store import retention
from proxy.store.base import MAX_ANCESTOR_DEPTH, walk_ancestors
from proxy.store.batch import Finish as _Finish
from proxy.store.batch import Insert as _Insert
from proxy.store.batch import SaveState as _SaveState
from proxy.store.cache_feedback import FeedbackStore
from proxy.store.dialect import SQLITE
from proxy.store.migrations import apply_migrations
from proxy.store.private_file import private_database
from proxy.store.session_locks import SessionLocks
from proxy.store.sqlite_hold import Hold as _Hold
from proxy.store.sqlite_lock_retry import retry_locked as _retry_locked
from proxy.store.sqlite_reads import reading as _reading
from proxy.store.sqlite_writes import BATCH_WINDOW_S, MAX_BATCH, SqliteWrites
from proxy.store.state_bytes import (
    DEFAULT_CACHE_BYTES,
    DEFAULT_CACHE_ENTRIES,
    DEFAULT_MAX_STATE_BYTES,
    StateCache,
)
from proxy.store.write_budget import BUFFER_BYTES
from rules.base import Ancestor, SessionState

__all__ = ["BATCH_WINDOW_S", "MAX_BATCH", "SQLiteStore", "Store"]
log = logging.getLogger("ctxproxy.store")


class SQLiteStore(SqliteWrites):
    kind = "sqlite"
    dialect = SQLITE
    rows_dropped = 0  # never: the queue is in memory and the file is local

    def __init__(
        self,
        path: str,
        state_cache_size: int = DEFAULT_CACHE_ENTRIES,
        batch_window_s: float = BATCH_WINDOW_S,
        max_state_bytes: int = DEFAULT_MAX_STATE_BYTES,
        state_cache_bytes: int = DEFAULT_CACHE_BYTES,
        buffer_rows: int = 100_000,
        buffer_bytes: int = BUFFER_BYTES,
    ) -> None:
        super().__init__(state_cache_size, batch_window_s, max_state_bytes, buffer_rows,
                         buffer_bytes)  # fmt: skip
        self.path = path
        self._reader: aiosqlite.Connection | None = None  # a request's own reads
        self._views: aiosqlite.Connection | None = None  # the views' (``sqlite_reads``)
        # (state, parent id) by session; bounded by entries and bytes (``state_bytes``)
        self._states: StateCache[_Known] = StateCache(
            _state_of, state_cache_size, state_cache_bytes
        )
        # the upstream's cache report per session (proxy.store.cache_feedback)
        self.cache_feedback = FeedbackStore(self)
        self.locks = SessionLocks()
        self.applied: list[str] = []

    async def open(self) -> None:
        if self.path != ":memory:":
            private_database(Path(self.path))
        try:
            self._writer = await aiosqlite.connect(self.path)
            await self._writer.execute("PRAGMA busy_timeout=2000")
            self.applied = await _retry_locked(self._prepare_writer)
            if self.path == ":memory:":
                self._reader = self._views = self._writer
            else:
                self._reader = await _reading(self.path)  # each kept at once: closed on failure
                self._views = await _reading(self.path)
        except BaseException:  # not a database, read-only, …: no connection's thread left behind
            await self._stop_connections()
            raise
        self._reader.row_factory = self._views.row_factory = aiosqlite.Row
        self._start_writing()

    async def _prepare_writer(self) -> list[str]:
        assert self._writer is not None, "opened first"
        # a new file only (before its first table): `ctxproxy vacuum` can give pages back in place
        await self._writer.execute("PRAGMA auto_vacuum=INCREMENTAL")
        await self._writer.execute("PRAGMA journal_mode=WAL")
        await self._writer.execute("PRAGMA synchronous=NORMAL")
        return await apply_migrations(self._writer)

    async def close(self) -> None:
        try:
            if self._writer_task is not None:
                task, self._writer_task = self._writer_task, None
                self._window.close()
                await self._queue.put(None)
                await task  # raises if it was cancelled (a second Ctrl-C): the finally still runs
        finally:
            await self._stop_connections()

    async def _stop_connections(self) -> None:
        """Close the connections: each one's worker thread (not a daemon) is told to end before
        anything is awaited, so the process can exit even if this await is cancelled."""
        held = (self._reader, self._views, self._writer)
        conns = [c for c in dict.fromkeys(held) if c is not None]
        self._writer = self._reader = self._views = None
        await asyncio.gather(*[f for f in (c.stop() for c in conns) if f], return_exceptions=True)

    async def prune(self, older_than: float, idle_before: float) -> dict[str, int]:
        """Delete request rows created before ``older_than`` and sessions (their cache report
        too) not updated since ``idle_before``: bounded steps in the writer task."""
        return await retention.prune_sqlite(self, older_than, idle_before)

    async def ping(self) -> bool:
        """The store answers: its writer task runs and the database reads."""
        task = self._writer_task
        return task is not None and not task.done() and await retention.ping_sqlite(self)

    def describe(self) -> str:
        return self.path if self.path == ":memory:" else str(Path(self.path).resolve())

    # ----- sessions -----

    def session(
        self, session_id: str, slot: contextlib.AbstractAsyncContextManager[None] | None = None
    ) -> _Hold:
        """The session held in this process for one load → pipeline → save (``slot``: none is
        bounded here, a hold takes nothing shared)."""
        return _Hold(self, session_id)

    def known_state(self, session_id: str) -> None:
        """Nothing to run ahead on: a hold here is this process's lock and its state cache."""
        return None

    async def load_state(self, session_id: str) -> tuple[SessionState, str | None]:
        """(state, parent id) of a session; an empty state for a session never seen."""
        cached = self._states.touch(session_id)
        if cached is not None:
            return cached
        queued = self._unwritten.get(session_id)
        if queued is not None:  # evicted from the cache while its save waits for the writer
            found = (queued.state, queued.parent_id)
            self._remember(session_id, found)
            return found
        # The reader: a lookup must not queue behind the writer's backlog or its lock waits.
        try:
            async with self.reader.execute(
                "SELECT state, parent_id FROM sessions WHERE id = ?", (session_id,)
            ) as cur:
                row = await cur.fetchone()
        except sqlite3.DatabaseError as exc:
            if not SQLITE.unreadable(exc):
                raise
            log.error("store: session state cannot be read (%s: %s); it starts empty",
                      type(exc).__name__, exc)  # fmt: skip
            return SessionState(), None
        found = (SessionState(orjson.loads(row[0])), row[1]) if row else (SessionState(), None)
        self._remember(session_id, found, len(row[0]) if row else 2)
        return found

    def _remember(self, session_id: str, value: _Known, json_bytes: int | None = None) -> None:
        self._states.put(session_id, value, json_bytes)

    def _written(
        self, session_id: str, state: SessionState, stored: SessionState, json_bytes: int
    ) -> None:
        """The writer stored ``state`` (as ``stored``): the cache learns its size, and holds
        what was stored when some of it was left out (``state_bytes.stored_state``)."""
        hit = self._states.get(session_id)
        new = (stored, hit[1]) if hit is not None and stored is not state else None
        self._states.written(session_id, state, new, json_bytes)

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
        return await walk_ancestors(parent_id, depth, self.load_state)

    # ----- request log -----

    async def insert_request(self, row: dict[str, Any]) -> None:
        self._enqueue(_Insert(dict(row)))  # a copy: the caller goes on updating its row

    async def finish_request(self, request_id: str, fields: dict[str, Any]) -> None:
        self._enqueue(_Finish(request_id, dict(fields)))



_Known = tuple[SessionState, str | None]  # a session's state and parent id, as cached


def _state_of(known: _Known) -> SessionState:
    return known[0]


Store = SQLiteStore  # the name callers used before there were two stores
