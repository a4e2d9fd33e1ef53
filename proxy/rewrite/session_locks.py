"""One asyncio lock per session, so two requests of a session never read the same state and
overwrite each other's updates (load → pipeline → save is one critical section). Locks of idle
sessions are discarded."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class SessionLocks:
    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(session_id, (asyncio.Lock(), 0))
        self._locks[session_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[session_id]
            if users <= 1:
                del self._locks[session_id]
            else:
                self._locks[session_id] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)
