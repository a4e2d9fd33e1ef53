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
from collections import OrderedDict, deque
from collections.abc import AsyncIterator

from proxy.fair_share import may_take


def hold_bound(store_kind: str, pool_size: int) -> int | None:
    """Half the PostgreSQL pool (at least 1); None (no bound) for SQLite."""
    return max(1, pool_size // 2) if store_kind == "postgresql" else None


class HoldSlots:
    """Per principal, at most ``bound`` holds at once, and its share of the ``capacity`` (the
    pool) when that is nearly all held (a principal with none is not kept). Waiters are served
    in their order, each principal's own first come first served: a release hands its slot to
    the first waiter that may hold now, and a request finding its principal's waiters queued
    queues behind them (woken all at once, as before, a request coming in as a slot was let go
    took it ahead of them, and each release did work for every waiter)."""

    def __init__(self, bound: int | None, capacity: int | None = None) -> None:
        self.bound = bound
        self.capacity = capacity if capacity is not None else (2 * bound if bound else None)
        self._held: dict[str, int] = {}  # by principal: its holds now
        self._users: dict[str, int] = {}  # by principal: its holds and its waits
        self._total = 0
        # by principal, its waits' futures (made in the loop that waits) in their order; the
        # principals in the order they are next served (one served goes last)
        self._queues: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()

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
            if principal in self._queues or not self.may_hold(principal):
                await self._wait(principal)  # the slot is taken for it when it is woken
            else:
                self._take(principal)
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

    async def _wait(self, principal: str) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._queues.setdefault(principal, deque())
        queue.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():  # its slot was taken: passed on
                self._release(principal)
            else:
                with contextlib.suppress(ValueError):
                    queue.remove(waiter)
                if not queue and self._queues.get(principal) is queue:
                    del self._queues[principal]
                self._wake()
            raise

    def _take(self, principal: str) -> None:
        self._held[principal] = self._held.get(principal, 0) + 1
        self._total += 1

    def _release(self, principal: str) -> None:
        held = self._held[principal] - 1
        if held:
            self._held[principal] = held
        else:
            del self._held[principal]
        self._total -= 1
        self._wake()

    def _wake(self) -> None:
        """Takes a slot for each first waiter that may hold now, principals in turn; a release
        serves one or a few (a principal leaving the pool widens the others' shares), so the
        work is a look at each principal waiting, not at each waiter."""
        served = True
        while served and self._queues:
            served = False
            for principal in list(self._queues):
                queue = self._queues[principal]
                while queue and queue[0].done():  # cancelled: its task takes it out
                    queue.popleft()
                if queue and self.may_hold(principal):
                    self._take(principal)
                    queue.popleft().set_result(None)
                    served = True
                    if queue:
                        self._queues.move_to_end(principal)
                if not queue:
                    del self._queues[principal]

    def lease(self, principal: str) -> contextlib.AbstractAsyncContextManager[None] | None:
        """One of ``principal``'s slots, for the store to take once the session's turn is had;
        None where holds are not bounded (nothing to take)."""
        return None if self.bound is None else self.slot(principal)

    def users(self, principal: str) -> int:
        """``principal``'s requests holding a slot or waiting for one."""
        return self._users.get(principal, 0)
