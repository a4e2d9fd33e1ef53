"""The SQLite store's hold on a session (its in-process lock taken, its state loaded) and a call
run by its writer task between two batches."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import aiosqlite

from proxy.store.session_locks import LocalSession as _Held
from proxy.store.session_locks import SessionLocks
from rules.base import SessionState


class _Store(Protocol):
    """What a hold reads of ``SQLiteStore`` (named so, not imported: it imports this module)."""

    locks: SessionLocks

    async def load_state(self, session_id: str) -> tuple[SessionState, str | None]: ...


@dataclass(frozen=True)
class Call:
    fn: Callable[[aiosqlite.Connection], Awaitable[Any]]
    done: asyncio.Future[Any]

    async def run(self, db: aiosqlite.Connection) -> None:
        if self.done.done():  # its caller gave up (cancelled)
            return
        try:
            result = await self.fn(db)
        except Exception as exc:
            if not self.done.done():
                self.done.set_exception(exc)
        else:
            if not self.done.done():
                self.done.set_result(result)


class Hold:
    """``SQLiteStore.session``: its lock taken, its state loaded; let go on exit. A class, not
    two nested generator-based context managers (``asynccontextmanager``): those cost several
    µs of every request's CPU to enter and leave."""

    __slots__ = ("session_id", "store")

    def __init__(self, store: _Store, session_id: str) -> None:
        self.store, self.session_id = store, session_id

    async def __aenter__(self) -> _Held:
        locks = self.store.locks
        await locks.acquire(self.session_id)
        try:
            state, parent_id = await self.store.load_state(self.session_id)
        except BaseException:
            locks.release(self.session_id)
            raise
        return _Held(self.store, self.session_id, state, parent_id)

    async def __aexit__(self, *exc_info: object) -> None:
        self.store.locks.release(self.session_id)
