"""Sessions one principal holds at once, bounded where a hold takes a shared resource: on
PostgreSQL each hold takes a pooled connection (``store.pool_size``, shared by every tenant) for
as long as the request's rules run, and a heavy request's rules wait their turn in the worker
thread (``proxy.rewrite.offload``, one job of a principal at a time) while it holds. So a tenant
sending 30 heavy requests on 30 sessions held the whole pool while they queued behind each other,
and another tenant's request waited for a connection (up to ``store.lock_timeout_s``, then served
read-only: its state not saved). With the bound, a principal holds at most half the pool; its
further requests wait here, for its own to finish, not in the pool's queue. Half each, two such
tenants still held the whole pool: once one more hold would leave under an eighth of the pool
free while another principal holds, each holds at most an equal share with one kept for a tenant
yet to come (as ``proxy.server.in_flight`` shares the upstream connections). SQLite's holds are
this process's locks (nothing shared to bound)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from proxy.fair_share import may_take


def hold_bound(store_kind: str, pool_size: int) -> int | None:
    """Half the PostgreSQL pool (at least 1); None (no bound) for SQLite."""
    return max(1, pool_size // 2) if store_kind == "postgresql" else None


class HoldSlots:
    """Per principal, at most ``bound`` holds at once, and its share of the ``capacity`` (the
    pool) when that is nearly all held (a principal with none is not kept)."""

    def __init__(self, bound: int | None, capacity: int | None = None) -> None:
        self.bound = bound
        self.capacity = capacity if capacity is not None else (2 * bound if bound else None)
        self._held: dict[str, int] = {}  # by principal: its holds now
        self._users: dict[str, int] = {}  # by principal: its holds and its waits
        self._total = 0
        # each wait's future (made in the loop that waits): every release wakes them all, and
        # each looks again whether its principal may hold
        self._waiters: list[asyncio.Future[None]] = []

    def may_hold(self, principal: str) -> bool:
        """Whether one more hold of ``principal``'s fits its bound and, where one applies, its
        share."""
        held = self._held.get(principal, 0)
        if self.bound is None or self.capacity is None:
            return True
        if held >= self.bound:
            return False
        others = len(self._held) - (principal in self._held)
        return may_take(held, self._total, others, self.capacity)

    @contextlib.asynccontextmanager
    async def slot(self, principal: str) -> AsyncIterator[None]:
        """One of ``principal``'s slots, for as long as the block runs."""
        if self.bound is None:
            yield
            return
        self._users[principal] = self._users.get(principal, 0) + 1
        try:
            while not self.may_hold(principal):
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                try:
                    await waiter
                finally:
                    with contextlib.suppress(ValueError):  # woken: no longer listed
                        self._waiters.remove(waiter)
            self._held[principal] = self._held.get(principal, 0) + 1
            self._total += 1
            try:
                yield
            finally:
                self._release(principal)
        finally:
            users = self._users[principal] - 1
            if users:
                self._users[principal] = users
            else:
                del self._users[principal]

    def _release(self, principal: str) -> None:
        held = self._held[principal] - 1
        if held:
            self._held[principal] = held
        else:
            del self._held[principal]
        self._total -= 1
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def lease(self, principal: str) -> contextlib.AbstractAsyncContextManager[None] | None:
        """One of ``principal``'s slots, for the store to take once the session's turn is had;
        None where holds are not bounded (nothing to take)."""
        return None if self.bound is None else self.slot(principal)

    def users(self, principal: str) -> int:
        """``principal``'s requests holding a slot or waiting for one."""
        return self._users.get(principal, 0)
