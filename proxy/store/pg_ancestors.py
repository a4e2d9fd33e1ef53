"""A session's ancestors read for ``PostgresStore`` without holding the session (a token
count's): from the database, bounded as a hold's wait is, or what this process knows while the
database is away."""

from __future__ import annotations

from typing import Any

from proxy.store.base import MAX_ANCESTOR_DEPTH, walk_ancestors
from proxy.store.pg_session import ancestors as _ancestors
from proxy.store.pg_writer import Health, is_connection_error
from rules.base import Ancestor, SessionState


class PgAncestors:
    """``ancestors`` and ``known_ancestors`` of ``PostgresStore`` (its pool, health, cache and
    lock timeout)."""

    _pool: Any  # Connections, once open
    _states: Any  # StateCache of the sessions' cached states
    health: Health
    lock_timeout_ms: int

    async def settled(self, session_id: str | None) -> None:
        raise NotImplementedError

    async def ancestors(
        self, parent_id: str | None, depth: int = MAX_ANCESTOR_DEPTH
    ) -> list[Ancestor]:
        """Read without holding the session (a count's): while the database is away, what this
        process knows, as a request's offline hold reads them."""
        if self.health.skip():
            return await self.known_ancestors(parent_id, depth)
        await self.settled(parent_id)
        try:  # as a hold waits: a full pool for the lock timeout at most
            conn = await self._pool.take(self.lock_timeout_ms / 1000)
        except TimeoutError:
            return await self.known_ancestors(parent_id, depth)
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            self.health.failed(exc)
            return await self.known_ancestors(parent_id, depth)
        try:
            rows = await _ancestors(conn, parent_id, depth)
        except BaseException as exc:
            self._pool.discard(conn)  # it may be mid-statement
            if not isinstance(exc, Exception):
                raise
            if not is_connection_error(exc) and not isinstance(exc, TimeoutError):
                raise
            self.health.failed(exc)
            return await self.known_ancestors(parent_id, depth)
        self._pool.give(conn)
        self.health.ok()
        return rows

    async def known_ancestors(
        self, parent_id: str | None, depth: int = MAX_ANCESTOR_DEPTH
    ) -> list[Ancestor]:
        """Up to ``depth`` ancestors as this process knows them (an unknown one's state empty)."""

        async def known(session_id: str) -> tuple[SessionState, str | None]:
            cached = self._states.get(session_id)
            return (cached.state, cached.parent_id) if cached else (SessionState(), None)

        return await walk_ancestors(parent_id, depth, known)
