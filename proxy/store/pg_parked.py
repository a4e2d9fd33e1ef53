"""The PostgreSQL store's parked sessions: a connection kept a moment after a session's save,
still holding the session's advisory lock, for the session's next request when it comes close
behind (``PARK_S``). That request then needs no HOLD round trip: nobody can have written in
between. After ``PARK_S``, or at once when anything needs connections, the lock is let go, and
another replica wanting the session waits for it as for any holder. Sessions whose requests come
further apart (an agent running tools between model calls) never park."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from proxy.store import pg_queries as q
from proxy.store.pg_writer import Health, is_connection_error

# How long a connection stays parked, still holding its session after the save, for the session's
# next request (another replica wanting the session waits that long at most); and how close
# behind its last save a request must come for the session's next save to park.
PARK_S = 0.005


@dataclass
class Parked:
    conn: Any
    key: int  # the session's advisory lock, which ``conn`` holds
    version: int | None  # the version its save stored
    timer: asyncio.TimerHandle


class ParkedSessions:
    """By session: its parked connection. ``let_go`` (the store's) unlocks one and gives its
    connection back; each such task is added to ``tasks`` (the store's saves under way), so a
    flush or close waits for it."""

    def __init__(
        self, let_go: Callable[[Parked], Coroutine[Any, Any, None]], tasks: set[asyncio.Task[None]]
    ) -> None:
        self._parked: dict[str, Parked] = {}
        self._let_go = let_go
        self._tasks = tasks

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._parked

    def __len__(self) -> int:
        return len(self._parked)

    def park(self, session_id: str, conn: Any, key: int, version: int | None) -> None:
        """Keep ``conn`` for the session's next request, ``PARK_S`` at most."""
        timer = asyncio.get_running_loop().call_later(PARK_S, self.release, session_id)
        self._parked[session_id] = Parked(conn, key, version, timer)

    def take(self, session_id: str) -> Parked | None:
        """The session's parked connection, for its next request (no longer parked), if any."""
        parked = self._parked.pop(session_id, None)
        if parked is not None:
            parked.timer.cancel()
        return parked

    def release(self, session_id: str) -> None:
        """Let the session's parked connection go now (unlocked in a task of ``tasks``)."""
        parked = self.take(session_id)
        if parked is None:
            return
        task = asyncio.create_task(self._let_go(parked))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def release_all(self) -> None:
        for session_id in list(self._parked):
            self.release(session_id)


async def let_go(pool: Any, health: Health, parked: Parked) -> None:
    """Unlock a parked session and give its connection back to ``pool`` (a connection that
    failed to unlock is closed: the server drops the lock with it)."""
    try:
        await parked.conn.fetchval(q.LET_GO, parked.key)
    except BaseException as exc:
        pool.discard(parked.conn)
        if not isinstance(exc, Exception):
            raise
        if is_connection_error(exc):
            health.failed(exc)
        return
    pool.give(parked.conn)
