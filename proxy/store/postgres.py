"""PostgreSQL store (asyncpg): the request log and the session state shared by the replicas of a
gateway. The interface is ``proxy.store.base.Store``; the request log's writer is
``proxy.store.pg_writer``; the session holds are ``proxy.store.pg_holds``; the schema is
``proxy.store.pg_migrations``; the design (holds, saves, locks, fail-open) is in
docs/operations.md, "The PostgreSQL store".

A session is held for one request (``session``): this process's lock for it, then one pooled
connection holding PostgreSQL's session-level advisory lock keyed by the session, so two replicas
take turns. The hold (``q.HOLD``) reads the state only when its stored version is not the cached
one; the save (``q.SAVE``) upserts, commits and only then unlocks. Saves wait at most 2 ms for the
answer to go out (``proxy.store.pg_deferred``); a session's close requests reuse a parked, still
locked connection (``proxy.store.pg_parked``); for a session this replica served last the engine
runs the pipeline on the cached state while the hold is in flight (``known_state``).

Why a session-level lock, not ``pg_advisory_xact_lock``: asyncpg sends one statement per round
trip, so a transaction-scoped lock costs two more round trips. A session-level lock outlives a
rollback, so a connection that may hold one is never pooled after a failure: it is closed, and
the server drops the lock with it. Fail-open: when PostgreSQL cannot be reached the session is
served from the cache (or empty) and its new state kept in memory only."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from proxy.store import pg_parked
from proxy.store import pg_queries as q
from proxy.store.base import MAX_ANCESTOR_DEPTH, masked
from proxy.store.batch import Finish, Insert, Statement
from proxy.store.cache_feedback import FeedbackStore
from proxy.store.dialect import POSTGRES
from proxy.store.lull import Lull
from proxy.store.pg_deferred import DeferredSaves
from proxy.store.pg_holds import PgHolds
from proxy.store.pg_migrations import apply_pg_migrations
from proxy.store.pg_parked import ParkedSessions, let_go
from proxy.store.pg_pool import Connections
from proxy.store.pg_reads import PgReads, prune_rows
from proxy.store.pg_session import Cached as _Cached
from proxy.store.pg_session import Held as _Held
from proxy.store.pg_session import state_of as _state_of
from proxy.store.pg_unavailable import CONNECT_TIMEOUT_S, open_errors, unavailable
from proxy.store.pg_writer import (
    BATCH_WINDOW_S,
    Health,
    PgWriter,
    is_connection_error,
    unwritable,
)
from proxy.store.pg_writer import unanswered as _unanswered
from proxy.store.session_locks import SessionLocks
from proxy.store.state_bytes import (
    DEFAULT_CACHE_BYTES,
    DEFAULT_CACHE_ENTRIES,
    DEFAULT_MAX_STATE_BYTES,
    StateCache,
)
from proxy.store.write_budget import BUFFER_BYTES
from rules.base import SessionState

log = logging.getLogger("ctxproxy.store")
# how much longer than the lock timeout a statement may take before the database is taken for
# one that stopped answering
STATEMENT_MARGIN_S = 5.0
# The server notices that a replica's host is gone (powered off, cut from the network: no FIN or
# RST ever comes) and ends its connections, with the session locks they hold: an idle one after
# 10 s and 3 probes 5 s apart unanswered, one whose data goes unacknowledged for 25 s. The
# kernel's defaults took 2 h 11 min, and meanwhile every request of a session that host held
# waited the lock timeout on the other replicas and saved nothing.
# the database's clock is followed to within this (``PostgresStore._stamp``)
CLOCK_STEP_S = 0.1
PEER_SETTINGS = {
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
    "tcp_user_timeout": "25000",  # ms; PostgreSQL 12 and later (``pg_pool``: dropped before)
}


class PostgresStore(PgHolds, PgReads):
    kind = "postgresql"
    dialect = POSTGRES

    def __init__(
        self,
        url: str,
        pool_size: int = 20,
        buffer_rows: int = 100_000,
        lock_timeout_s: float = 10.0,
        heartbeat_s: float = 10.0,
        batch_window_s: float = BATCH_WINDOW_S,
        state_cache_size: int = DEFAULT_CACHE_ENTRIES,
        max_state_bytes: int = DEFAULT_MAX_STATE_BYTES,
        state_cache_bytes: int = DEFAULT_CACHE_BYTES,
        buffer_bytes: int = BUFFER_BYTES,
    ) -> None:
        self.url = url
        self.pool_size = pool_size
        self.lock_timeout_ms = max(1, int(lock_timeout_s * 1000))
        self.heartbeat_s = heartbeat_s
        self.instance = uuid.uuid4().hex[:16]  # this process, in its rows and heartbeat
        self.health = Health()
        self.locks = SessionLocks()
        self.lull = Lull()  # the requests in flight (subscribed by the app): the writer waits
        # the database's clock minus this host's (``_stamp``): cache reports are dated by it
        self.clock_offset = 0.0
        self.cache_feedback = FeedbackStore(
            self, unreachable=_unanswered, clock_offset=lambda: self.clock_offset
        )
        self.applied: list[str] = []
        self.lock_timeouts = 0
        self._buffer_rows, self._buffer_bytes = buffer_rows, buffer_bytes
        self._batch_window_s = batch_window_s
        # bounded by entries and bytes (``state_bytes``)
        self._states: StateCache[_Cached] = StateCache(
            _state_of, state_cache_size, state_cache_bytes
        )
        self.max_state_bytes = max_state_bytes
        self._pool: Any = None  # Connections, once open
        self._writer: PgWriter | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._started = time.time()
        self._ending: set[asyncio.Task[None]] = set()  # sessions being saved
        self._saving: dict[str, _Held] = {}  # by session: the one being saved now
        self._deferred = DeferredSaves()  # saves waiting for their request's answer to go out
        self._parked = ParkedSessions(
            lambda parked: let_go(self._pool, self.health, parked), self._ending
        )  # connections still holding their session
        self._closing = False

    # ----- lifetime -----

    async def open(self) -> None:
        self._pool = Connections(
            self.url,
            self.pool_size,
            CONNECT_TIMEOUT_S,
            # no commit waits for the WAL flush: one lost in a crash of the database itself is as
            # one in SQLite's batch window
            server_settings={"synchronous_commit": "off", **PEER_SETTINGS},
            # a session's hold waits up to the lock timeout on the server: past that and a margin
            # the database is not answering (``_hold``: it goes offline, as when it is away)
            command_timeout=self.lock_timeout_ms / 1000 + STATEMENT_MARGIN_S,
        )
        self._pool.on_wait = self._on_pool_wait
        self.health.on_failure = self._pool.drop_idle
        try:
            async with self._pool.acquire() as conn:
                self.applied = await apply_pg_migrations(conn)
                await self._stamp(conn)
        except open_errors() as exc:  # one line for the command to say, not a traceback
            self._pool.terminate()
            self._pool = None
            raise unavailable(self.url, exc) from None
        self._writer = PgWriter(
            self._pool,
            self.health,
            self._buffer_rows,
            self._batch_window_s,
            self.lull,
            self._buffer_bytes,
        )
        self._writer.start()
        self._heartbeat = asyncio.create_task(self._beat(), name="ctxproxy-pg-heartbeat")

    async def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
        self._closing = True  # a save ending now lets its session go rather than park
        await self._settle_all()
        if self._writer is not None:
            await self._writer.close()
        if self._pool is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await self._pool.execute(q.GONE, self.instance)
            try:
                async with asyncio.timeout(5.0):
                    await self._pool.close()
            except (TimeoutError, Exception):
                self._pool.terminate()
        self._pool = self._writer = self._heartbeat = None

    def describe(self) -> str:
        return masked(self.url)

    @property
    def writer(self) -> PgWriter:
        assert self._writer is not None, "store is not open"
        return self._writer

    @property
    def write_errors(self) -> int:
        return self._writer.write_errors if self._writer else 0

    @property
    def rows_dropped(self) -> int:
        return self._writer.rows_dropped if self._writer else 0

    @property
    def backlog(self) -> int:
        return self._writer.backlog if self._writer else 0

    async def _beat(self) -> None:
        """Say this replica is alive; mark the in-flight rows of those silent for 3 beats."""
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                async with self._pool.acquire(timeout=self.heartbeat_s) as conn:
                    await self._stamp(conn)
                    marked = await conn.fetchval(q.SWEEP, 3.0 * self.heartbeat_s)
                if marked:
                    log.warning("store: %d requests of stopped replicas marked incomplete", marked)
            except Exception as exc:
                if unwritable(exc):  # read-only, its disk full: the writer logs the refusals
                    if self._writer is not None:
                        self._writer.refusals.refused(exc, "heartbeats wait until it does")
                elif not is_connection_error(exc):
                    log.exception("store: heartbeat failed")

    async def _stamp(self, conn: Any) -> None:
        """Beat, and read the database's clock against this host's on the way: the offset moves
        only past ``CLOCK_STEP_S`` (a round trip's noise left out) and from a quick round trip,
        so hosts whose clocks agree date everything by their own."""
        before = time.time()
        at = await conn.fetchval(q.HEARTBEAT, self.instance, self._started)
        after = time.time()
        offset = float(at) - (before + after) / 2
        if after - before <= 2 * CLOCK_STEP_S and abs(offset - self.clock_offset) > CLOCK_STEP_S:
            self.clock_offset = offset

    # ----- sessions -----

    @contextlib.asynccontextmanager
    async def session(
        self, session_id: str, slot: contextlib.AbstractAsyncContextManager[None] | None = None
    ) -> AsyncIterator[_Held]:
        """The session held across replicas for one load → pipeline → save; ``slot`` (one of
        the principal's share of the pool, ``hold_slots``) taken once this process's turn of the
        session is had, and kept while the session is."""
        # close behind its last save (or during it): this request's save keeps the session
        keep = session_id in self._saving or session_id in self._parked or self._recent(session_id)
        self._deferred.go(session_id)  # its previous request's save, if it waits: now
        # one wait of lock_timeout_s in all, here and for the other replicas: a request behind
        # others of its session, each waiting out the lock of a replica that stalled, waited
        # its own timeout after each of theirs (N × lock_timeout_s)
        deadline = time.monotonic() + self.lock_timeout_ms / 1000
        if not await self._turn(session_id):
            yield self._read_only(session_id, "here, behind its other requests")
            return
        handed_off = False
        slots = contextlib.AsyncExitStack()
        try:
            if slot is not None:
                queued = time.monotonic()
                await slots.enter_async_context(slot)
                # the principal's own queue (its other sessions' holds), not a wait for a lock or
                # a connection: not charged to the lock timeout, or a tenant's 30 concurrent
                # requests served their last ones read-only (their state unsaved)
                deadline += time.monotonic() - queued
            left_ms = max(1, int((deadline - time.monotonic()) * 1000))
            held = await self._hold(session_id, keep, left_ms)
            try:
                yield held
            except BaseException:
                await held.end(commit=False)
                raise
            if held.conn is None or not held.saving:
                await held.end(commit=True)
            else:  # the save and commit go on after the request does; the session stays held
                self._saving[session_id] = held
                task = self._deferred.start(session_id, functools.partial(self._end, held))
                self._ending.add(task)
                task.add_done_callback(self._ending.discard)
                handed_off = True
        finally:
            try:
                await slots.aclose()
            finally:
                if not handed_off:
                    self.locks.release(session_id)

    async def settled(self, session_id: str | None) -> None:
        """The saves under way here of a session and of its ancestors known here, started now
        and done: a sub-agent reads what its parent's last request saved, also while that save
        waited for the parent's answer to go out."""
        seen: set[str] = set()
        while session_id and session_id not in seen and len(seen) < MAX_ANCESTOR_DEPTH:
            seen.add(session_id)
            task = self._deferred.task_of(session_id)
            if task is not None:
                self._deferred.go(session_id)
                await asyncio.wait({task})  # not cancelled with the request that waits
            known = self._states.get(session_id)
            session_id = known.parent_id if known is not None else None

    async def _end(self, held: _Held) -> None:
        try:
            await held.end(commit=True)
        except Exception as exc:
            if not unwritable(exc):
                log.exception("store: saving session %s failed", held.session_id)
            elif self._writer is not None:  # its new state is kept here until a save takes it
                self._writer.refusals.refused(exc, "sessions' new states are kept in memory")
        finally:
            if self._saving.get(held.session_id) is held:
                del self._saving[held.session_id]
            self.locks.release(held.session_id)

    def _recent(self, session_id: str) -> bool:
        cached = self._states.get(session_id)
        return cached is not None and time.monotonic() - cached.saved_at < pg_parked.PARK_S

    async def load_state(self, session_id: str) -> tuple[SessionState, str | None]:
        """The stored (state, parent id) as of now, without holding the session."""
        async with self.session(session_id) as held:
            return held.state, held.parent_id

    # ----- request log -----

    async def insert_request(self, row: dict[str, Any]) -> None:
        self._deferred.answering(row["id"], row.get("session_id"))
        self.writer.enqueue(Insert({**row, "instance": self.instance}))

    async def finish_request(self, request_id: str, fields: dict[str, Any]) -> None:
        self._deferred.answered(request_id)
        self.writer.enqueue(Finish(request_id, dict(fields)))

    def write_later(
        self, sql: str, params: tuple[Any, ...], key: str | None = None, order: float = 0.0
    ) -> None:
        self.writer.enqueue(Statement(sql, params, key, order))

    async def flush(self) -> None:
        await self._settle_all()
        await self.writer.flush()

    async def _settle_all(self) -> None:
        """Every waiting save started, every parked session let go, and all of them done."""
        self._deferred.go_all()
        self._parked.release_all()
        while self._ending:
            await asyncio.gather(*self._ending, return_exceptions=True)
            self._parked.release_all()

    # ----- data lifecycle -----

    async def prune(self, older_than: float, idle_before: float) -> dict[str, int]:
        """``pg_reads.prune_rows``; the sessions it deleted are forgotten here too."""
        counts, gone = await prune_rows(self._pool, older_than, idle_before)
        for session_id in gone:
            self._states.pop(session_id, None)
            self.cache_feedback.forget(session_id)
        return counts
