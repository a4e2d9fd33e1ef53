"""Sessions one principal holds at once, bounded where a hold takes a shared resource: on
PostgreSQL each hold takes a pooled connection (``store.pool_size``, shared by every tenant) for
as long as the request's rules run, and a heavy request's rules wait their turn in the worker
thread (``proxy.rewrite.offload``, one job of a principal at a time) while it holds. So a tenant
sending 30 heavy requests on 30 sessions held the whole pool while they queued behind each other,
and another tenant's request waited for a connection (up to ``store.lock_timeout_s``, then served
read-only: its state not saved). With the bound, a principal holds at most half the pool; its
further requests wait here, for its own to finish, not in the pool's queue. SQLite's holds are
this process's locks (nothing shared to bound)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


def hold_bound(store_kind: str, pool_size: int) -> int | None:
    """Half the PostgreSQL pool (at least 1); None (no bound) for SQLite."""
    return max(1, pool_size // 2) if store_kind == "postgresql" else None


class HoldSlots:
    """Per principal, at most ``bound`` holds at once (a principal with none is not kept)."""

    def __init__(self, bound: int | None) -> None:
        self.bound = bound
        self._slots: dict[str, tuple[asyncio.Semaphore, int]] = {}

    @contextlib.asynccontextmanager
    async def slot(self, principal: str) -> AsyncIterator[None]:
        """One of ``principal``'s slots, for as long as the block runs."""
        if self.bound is None:
            yield
            return
        semaphore, users = self._slots.get(principal, (asyncio.Semaphore(self.bound), 0))
        self._slots[principal] = (semaphore, users + 1)
        try:
            async with semaphore:
                yield
        finally:
            semaphore, users = self._slots[principal]
            if users <= 1:
                del self._slots[principal]
            else:
                self._slots[principal] = (semaphore, users - 1)

    def lease(self, principal: str) -> contextlib.AbstractAsyncContextManager[None] | None:
        """One of ``principal``'s slots, for the store to take once the session's turn is had;
        None where holds are not bounded (nothing to take)."""
        return None if self.bound is None else self.slot(principal)

    def users(self, principal: str) -> int:
        """``principal``'s requests holding a slot or waiting for one."""
        entry = self._slots.get(principal)
        return entry[1] if entry is not None else 0
