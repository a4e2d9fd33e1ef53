"""``HoldSlots``: a principal holds at most half the pool, and once the pool is nearly all held
while another principal holds, an equal share of it with one kept for a tenant to come: two
tenants' heavy requests, half the pool each, held all of it, and a third tenant's hold waited for
a connection (up to the lock timeout, then served read-only: its state unsaved)."""

from __future__ import annotations

import asyncio
import contextlib

from proxy.rewrite.hold_slots import HoldSlots


async def test_two_tenants_holding_half_the_pool_each_leave_a_third_a_slot() -> None:
    slots = HoldSlots(bound=4, capacity=8)  # a pool of 8: one kept free past 7 held
    async with contextlib.AsyncExitStack() as held:
        for _ in range(4):
            await held.enter_async_context(slots.slot("a"))
        for _ in range(3):
            await held.enter_async_context(slots.slot("b"))
        waiting = asyncio.create_task(held.enter_async_context(slots.slot("b")))
        await asyncio.sleep(0.01)
        assert not waiting.done()  # past its share beside a (8 // 3)
        async with asyncio.timeout(1):
            await held.enter_async_context(slots.slot("c"))  # at once
        assert slots.users("b") == 4
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        assert slots.users("b") == 3


async def test_a_principal_alone_holds_its_whole_bound_and_waiters_wake_on_release() -> None:
    slots = HoldSlots(bound=4, capacity=8)
    order: list[str] = []

    async def hold(name: str, seconds: float) -> None:
        async with slots.slot("a"):
            order.append(name)
            await asyncio.sleep(seconds)

    first = [asyncio.create_task(hold(f"h{i}", 0.05)) for i in range(4)]  # its bound, alone
    await asyncio.sleep(0.01)
    assert len(order) == 4
    late = asyncio.create_task(hold("late", 0))
    await asyncio.sleep(0.01)
    assert "late" not in order  # past its bound: waits for one of its own
    await asyncio.gather(*first, late)
    assert order[-1] == "late" and slots.users("a") == 0


async def test_without_a_bound_nothing_is_counted() -> None:
    slots = HoldSlots(None)
    async with slots.slot("a"), slots.slot("a"):
        assert slots.users("a") == 0


async def test_a_third_tenant_under_its_share_leaves_a_slot_to_a_fourth() -> None:
    """Shares bound what is taken: two tenants that took slots while the pool was free held more
    than theirs, and a third, under its own share, took holds past the pool, so a fourth
    tenant's first hold waited for a connection (up to the lock timeout, then read-only)."""
    slots = HoldSlots(bound=8, capacity=16)
    async with contextlib.AsyncExitStack() as held:
        for _ in range(8):
            await held.enter_async_context(slots.slot("a"))
        for _ in range(6):
            await held.enter_async_context(slots.slot("b"))  # 14: two kept free past it
        waiting = []
        for _ in range(4):
            waiting.append(asyncio.create_task(held.enter_async_context(slots.slot("c"))))
        await asyncio.sleep(0.01)
        async with asyncio.timeout(1):
            await held.enter_async_context(slots.slot("d"))
        try:
            assert slots._total <= 16, slots._total
        finally:
            for task in waiting:
                task.cancel()
            await asyncio.gather(*waiting, return_exceptions=True)
