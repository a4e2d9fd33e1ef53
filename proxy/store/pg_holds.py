"""The session holds of ``PostgresStore``: this process's turn of a session, then a pooled
connection holding PostgreSQL's advisory lock for it (``q.HOLD``, which reads the state only when
its stored version is not the cached one); a parked connection reused; and, where the database
cannot be reached or a lock waits too long, the session as known here (offline, read-only). The
design is in docs/operations.md, "The PostgreSQL store"."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg

from proxy.store import pg_queries as q
from proxy.store.cache_feedback import CacheFeedback, FeedbackStore
from proxy.store.pg_ancestors import PgAncestors
from proxy.store.pg_deferred import DeferredSaves
from proxy.store.pg_parked import ParkedSessions
from proxy.store.pg_session import Cached as _Cached
from proxy.store.pg_session import Held as _Held
from proxy.store.pg_session import found as _found
from proxy.store.pg_session import known as _known
from proxy.store.pg_session import session_lock_key
from proxy.store.pg_writer import is_connection_error
from proxy.store.session_locks import SessionLocks
from proxy.store.state_bytes import StateCache
from rules.base import SessionState

log = logging.getLogger("ctxproxy.store")


class PgHolds(PgAncestors):
    """The holds of ``PostgresStore`` (its pool, health, caches, locks and lock timeout)."""

    _pool: Any  # Connections, once open
    _states: StateCache[_Cached]
    _saving: dict[str, _Held]  # by session: the one being saved now
    _parked: ParkedSessions
    _deferred: DeferredSaves
    _closing: bool
    locks: SessionLocks
    cache_feedback: FeedbackStore
    lock_timeouts: int
    max_state_bytes: int

    async def _turn(self, session_id: str) -> bool:
        """This process's turn of the session (``locks``), within ``lock_timeout_s``."""
        try:
            async with asyncio.timeout(self.lock_timeout_ms / 1000):
                await self.locks.acquire(session_id)
        except TimeoutError:
            return False
        return True

    def _read_only(self, session_id: str, where: str) -> _Held:
        """The session as known here, not saved: it was held ``where`` past the lock timeout.
        Its cache report as known here too: reading it would wait for a connection again
        (unbounded, on a full pool), after the lock timeout already spent."""
        self.lock_timeouts += 1
        log.warning("store: session %s held %s too long; read-only", session_id, where)
        self.cache_feedback.offer(session_id, None)
        saving = self._saving.get(session_id)  # its last request's save, slow: what it saves
        if saving is not None and saving.saved is not None:
            return _Held(self, session_id, *saving.saved, saving.version, read_only=True)
        return _Held(self, session_id, *_known(self._states.get(session_id)), read_only=True)

    async def _hold(self, session_id: str, keep: bool = False, wait_ms: int | None = None) -> _Held:
        """The session held (``wait_ms``: at most that long for its lock or a connection; the
        lock timeout by default)."""
        wait_ms = self.lock_timeout_ms if wait_ms is None else wait_ms
        cached = self._states.get(session_id)
        parked = self._parked.take(session_id)
        if parked is not None:
            if parked.conn.is_closed() or self.health.away():
                self._pool.discard(parked.conn)
                parked = None
            elif cached is not None and cached.version == parked.version:
                # held since this replica's own save of the cached version: no other writer can
                # have come in between, so no HOLD to send (nor a cache report to read)
                return _Held(
                    self, session_id, cached.state, cached.parent_id, cached.version, parked.conn,
                    run_ahead=cached.run_ahead, key=parked.key, keep=keep and cached.run_ahead,
                )  # fmt: skip
        if self.health.skip():
            return self._offline(session_id, cached)
        conn = None
        key = session_lock_key(session_id)
        try:
            if parked is not None:  # the cached state was dropped (pruned): let go, then read
                conn = parked.conn
                await conn.fetchval(q.LET_GO, parked.key)
            else:
                conn = await self._pool.take(wait_ms / 1000)
            known = cached.version if cached else -1
            row = await conn.fetchrow(q.HOLD, key, session_id, known, wait_ms)
        except BaseException as exc:
            if conn is not None:
                if isinstance(exc, asyncpg.LockNotAvailableError):
                    # a wait timed out: for the session's lock, or after it, for a table an
                    # operator locked (VACUUM FULL, ALTER) with the session's lock already held
                    await self._pool.give_unlocked(conn, self.lock_timeout_ms / 1000 + 1)
                else:  # the lock may be held: only closing the connection surely frees it
                    self._pool.discard(conn)
            if conn is not None and isinstance(exc, TimeoutError):
                # no answer past the server's own lock timeout: it stopped answering
                self.health.failed(exc)
                return self._offline(session_id, cached)
            if isinstance(exc, asyncpg.LockNotAvailableError | TimeoutError):
                return self._read_only(session_id, "elsewhere")
            if not isinstance(exc, Exception) or not is_connection_error(exc):
                raise
            self.health.failed(exc)
            return self._offline(session_id, cached)
        self.health.ok()
        found, stored_feedback = _found(row, cached)
        self.cache_feedback.offer(session_id, stored_feedback)
        self._remember(session_id, found)
        return _Held(
            self, session_id, found.state, found.parent_id, found.version, conn,
            run_ahead=found.run_ahead, key=key, keep=keep and found.run_ahead,
        )  # fmt: skip

    def _park(self, session_id: str, conn: Any, key: int, version: int | None) -> None:
        """Keep a connection that still holds the session after its save (``pg_parked``)."""
        self._parked.park(session_id, conn, key, version)
        # a request may have started to wait for a connection during the save
        if self._closing or version is None or not self._pool.roomy:
            self._parked.release(session_id)

    def _on_pool_wait(self) -> None:
        self._deferred.go_all()
        self._parked.release_all()

    def _offline(self, session_id: str, cached: _Cached | None) -> _Held:
        # its cache feedback as known here (none if never seen): not read from the database
        self.cache_feedback.offer(session_id, None)
        return _Held(self, session_id, *_known(cached))

    def _remember(self, session_id: str, value: _Cached) -> None:
        self._states.put(session_id, value, value.size or None)

    def known_state(self, session_id: str) -> tuple[SessionState, CacheFeedback | None] | None:
        """The state cached for a session without a parent (or the one its last request is saving
        now, the state cached once that is done), when no other request of it is under way here
        (that one would save another), the last hold found no other replica's write and the
        database is being reached (offline, the hold costs nothing): the engine runs the pipeline
        on it while ``q.HOLD`` travels."""
        saving = self._saving.get(session_id)
        if saving is None:  # no request of the session under way here
            if self.locks.users(session_id):
                return None
            cached = self._states.get(session_id)
            if cached is None or not cached.run_ahead:
                return None
            state, parent = cached.state, cached.parent_id
        else:  # only the last request's save: the state it saves is the one cached next
            if self.locks.users(session_id) > 1 or not saving.run_ahead or saving.saved is None:
                return None
            state, parent = saving.saved
        known, feedback = self.cache_feedback.peek(session_id)
        if parent is not None or not known or self.health.away():
            return None
        return state, feedback
