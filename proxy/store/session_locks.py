"""One asyncio lock per session, so two requests of a session in this process never read the same
state and overwrite each other's updates (load → pipeline → save is one critical section). Locks
of idle sessions are discarded. Across processes, PostgreSQL's advisory lock does the same; this
one still goes first, so a process holds at most one database connection per session."""

from __future__ import annotations

import asyncio
from typing import Any

from rules.base import Ancestor, SessionState


class SessionLocks:
    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    async def acquire(self, session_id: str) -> None:
        """Wait for the session; ``release`` lets it go (from any task)."""
        lock, users = self._locks.get(session_id, (asyncio.Lock(), 0))
        self._locks[session_id] = (lock, users + 1)
        try:
            await lock.acquire()
        except BaseException:
            self._leave(session_id)
            raise

    def users(self, session_id: str) -> int:
        """Requests of the session holding it or waiting for it."""
        entry = self._locks.get(session_id)
        return entry[1] if entry is not None else 0

    def release(self, session_id: str) -> None:
        self._locks[session_id][0].release()
        self._leave(session_id)

    def _leave(self, session_id: str) -> None:
        lock, users = self._locks[session_id]
        if users <= 1:
            del self._locks[session_id]
        else:
            self._locks[session_id] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)


class LocalSession:
    """A session held by ``SQLiteStore.session`` (its lock is this process's)."""

    __slots__ = ("parent_id", "session_id", "state", "store")

    def __init__(
        self, store: Any, session_id: str, state: SessionState, parent_id: str | None
    ) -> None:
        self.store, self.session_id, self.state, self.parent_id = (
            store, session_id, state, parent_id,
        )  # fmt: skip

    async def ancestors(self, parent_id: str | None) -> list[Ancestor]:
        return await self.store.ancestors(parent_id)

    async def save(self, state: SessionState, parent_id: str | None) -> None:
        parent = parent_id if parent_id is not None else self.parent_id  # as the row keeps it
        await self.store.save_state(self.session_id, state, parent)
