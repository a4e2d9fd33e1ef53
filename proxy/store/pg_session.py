"""A session held by the PostgreSQL store for one request (``PostgresStore.session``): the state
it loaded, its connection holding the session's advisory lock (session-level), and the save
(upsert, commit, unlock: one call) when it is let go; and the reads done under that lock."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from proxy.store import pg_queries as q
from proxy.store.base import MAX_ANCESTOR_DEPTH
from proxy.store.cache_feedback import CacheFeedback
from proxy.store.pg_writer import Health, is_connection_error, unwritable
from proxy.store.state_bytes import StateCache, stored_state
from rules.base import Ancestor, SessionState


@dataclass(frozen=True)
class Cached:
    state: SessionState
    parent_id: str | None
    version: int  # the stored version this state is (0: no row)
    # whether the engine should run the pipeline on this state before the next hold returns:
    # not when the last hold found another replica's write (the session's requests alternate
    # between replicas, so the state cached here is likely old again)
    run_ahead: bool = True
    saved_at: float = 0.0  # time.monotonic() when this replica saved it (0: read, not saved)
    size: int = 0  # its JSON's bytes, as stored or read (0: not known)


def state_of(cached: Cached) -> SessionState:
    return cached.state


def known(cached: Cached | None) -> tuple[SessionState, str | None, int]:
    """(state, parent id, version) as cached here: an empty state when nothing is."""
    if cached is None:
        return SessionState(), None, 0
    return cached.state, cached.parent_id, cached.version


class Owner(Protocol):
    """What of ``proxy.store.postgres.PostgresStore`` a held session uses (named here, not
    imported: the store imports this module)."""

    _states: StateCache[Cached]
    _pool: Any  # Connections, once open
    _closing: bool
    max_state_bytes: int
    health: Health

    async def settled(self, session_id: str | None) -> None: ...
    def _park(self, session_id: str, conn: Any, key: int, version: int | None) -> None: ...
    def _remember(self, session_id: str, value: Cached) -> None: ...
    async def known_ancestors(self, parent_id: str | None) -> list[Ancestor]: ...


class Held:
    """A session held by ``PostgresStore.session``: its connection (None when PostgreSQL was
    not reached) holds the session's advisory lock (``key``) until ``end``."""

    __slots__ = (
        "_new", "conn", "keep", "key", "parent_id", "read_only", "run_ahead", "session_id",
        "state", "store", "version",
    )  # fmt: skip

    def __init__(
        self,
        store: Owner,
        session_id: str,
        state: SessionState,
        parent_id: str | None,
        version: int,
        conn: Any = None,
        read_only: bool = False,
        run_ahead: bool = True,
        key: int = 0,
        keep: bool = False,
    ) -> None:
        self.store, self.session_id, self.state, self.parent_id = (
            store, session_id, state, parent_id,
        )  # fmt: skip
        self.version, self.conn, self.read_only = version, conn, read_only
        self.run_ahead = run_ahead  # kept with the state this request saves
        self.key = key  # the advisory lock ``conn`` holds (session_lock_key), when it is set
        self._new: tuple[SessionState, str | None] | None = None
        # saved without letting the lock go, the connection then parked for the session's next
        # request (``proxy.store.pg_parked``): its requests come close behind one another
        self.keep = keep

    async def ancestors(self, parent_id: str | None) -> list[Ancestor]:
        if self.conn is None:  # offline: what this process knows
            return await self.store.known_ancestors(parent_id)
        await self.store.settled(parent_id)  # a save of theirs under way here: done first
        return await ancestors(self.conn, parent_id, MAX_ANCESTOR_DEPTH)

    @property
    def saving(self) -> bool:
        return self._new is not None

    @property
    def saved(self) -> tuple[SessionState, str | None] | None:
        """The (state, parent id) being saved: the state cached once the save is done."""
        return self._new

    async def save(self, state: SessionState, parent_id: str | None) -> None:
        self._new = (state, parent_id if parent_id is not None else self.parent_id)

    async def end(self, commit: bool) -> None:
        """Save (when ``commit`` and a state was given) and let the session go. The lock is
        released by the save's own call after its commit, or by ``LET_GO``; if either fails, the
        connection is closed (the server then drops the lock), never pooled with it."""
        store, new = self.store, self._new if commit else None
        if self.conn is None:
            if new is not None and not self.read_only:  # kept in memory until it can be stored
                store._remember(self.session_id, Cached(*new, self.version, self.run_ahead))
            return
        conn, version, self.conn = self.conn, None, None
        # parked only while connections are plentiful: else its lock would be let go at once
        # (a round trip more than the plain save's) for a request waiting for a connection
        keep = self.keep and store._pool.roomy and not store._closing
        size = 0
        try:
            if new is not None:
                # within the bound: without its largest namespaces when over it (``state_bytes``)
                stored, data = stored_state(new[0], store.max_state_bytes)
                if stored is not new[0]:
                    new = self._new = (stored, new[1])
                size = len(data)
                saving = (self.session_id, new[1], time.time(), data.decode())
                if keep:
                    version = await conn.fetchval(q.SAVE_KEPT, *saving)
                else:
                    version = await conn.fetchval(q.SAVE, self.key, *saving)
            else:
                await conn.fetchval(q.LET_GO, self.key)
        except BaseException as exc:
            if new is not None:  # as if offline: the next request finds out what was stored
                store._remember(self.session_id, Cached(*new, self.version, self.run_ahead))
            # a save refused by a database taking no writes: the connection is sound, and once
            # its lock is let go it is pooled again, not closed (a new server process a request)
            if isinstance(exc, Exception) and unwritable(exc) and await let_go(conn, self.key):
                store._pool.give(conn)
                raise
            store._pool.discard(conn)
            if isinstance(exc, Exception) and is_connection_error(exc):
                store.health.failed(exc)
                return
            raise
        if new is not None and version is not None:
            saved = Cached(*new, version, self.run_ahead, time.monotonic(), size)
            store._remember(self.session_id, saved)
        if new is not None and keep:
            store._park(self.session_id, conn, self.key, version)
        else:
            store._pool.give(conn)


async def let_go(conn: Any, key: int) -> bool:
    """Let the session's lock go on ``conn``: whether it held it and now holds it no longer."""
    try:
        return await conn.fetchval(q.LET_GO, key) is True
    except Exception:
        return False


def found(row: Any, cached: Cached | None) -> tuple[Cached, CacheFeedback | None]:
    """What a hold read (``q.HOLD``'s row), with the cached state it was checked against: the
    session as stored now, and its stored cache report."""
    feedback = None
    if row["at"] is not None:
        feedback = CacheFeedback(
            row["at"], row["prompt_tokens"], row["cached_tokens"], row["cache_write_tokens"]
        )
    version = row["version"] or 0
    if row["state"] is not None:  # not the version cached here (if any): another replica wrote
        state = SessionState(orjson.loads(row["state"]))
        now = Cached(
            state, row["parent_id"], version, run_ahead=cached is None, size=len(row["state"])
        )
    elif cached is not None and cached.version == version:
        now = Cached(cached.state, row["parent_id"] or cached.parent_id, version, size=cached.size)
    else:  # no row, and nothing cached of the no-row time
        now = Cached(SessionState(), None, 0)
    return now, feedback


async def ancestors(conn: Any, parent_id: str | None, depth: int) -> list[Ancestor]:
    """Up to ``depth`` ancestors, nearest first, stopping at cycles; a parent with no stored
    state is an ancestor with an empty one (as on SQLite)."""
    if not parent_id or depth < 1:
        return []
    rows = await conn.fetch(q.ANCESTORS, parent_id, depth)
    out = [
        Ancestor(r["id"], SessionState(orjson.loads(r["state"])), i + 1) for i, r in enumerate(rows)
    ]
    seen = {a.session_id for a in out}
    nxt = rows[-1]["parent_id"] if rows else parent_id
    if nxt and len(out) < depth and nxt not in seen:
        out.append(Ancestor(nxt, SessionState(), len(out) + 1))
    return out


def session_lock_key(session_id: str) -> int:
    """The session's advisory lock: a signed 64-bit digest (a collision only makes two sessions
    take turns)."""
    digest = hashlib.blake2b(session_id.encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)
