"""``HoldSlots``' waiters are served in their order: each release woke every waiter and each
looked again, so a request coming in as a slot was let go took it ahead of those waiting (one
waiting could be passed over for as long as others kept coming), and the work of a release grew
with the number waiting (all of them woken, all but one to wait again)."""

from __future__ import annotations

import asyncio
import time

from proxy.rewrite.hold_slots import HoldSlots


async def test_a_waiter_is_not_passed_over_by_requests_that_come_after_it() -> None:
    slots = HoldSlots(bound=1, capacity=2)
    served: list[str] = []

    async def churn() -> None:  # its requests, one after another, as a busy tenant's
        for i in range(50):
            async with slots.slot("a"):
                served.append(f"c{i}")
                await asyncio.sleep(0.001)

    async def waiter() -> None:
        async with slots.slot("a"):
            served.append("w")

    first = asyncio.create_task(churn())
    await asyncio.sleep(0)  # c0 holds
    late = asyncio.create_task(waiter())
    async with asyncio.timeout(5):
        await asyncio.gather(first, late)
    assert served.index("w") <= 2, served[:6]  # served after the hold it waited for


async def test_many_waiters_are_served_in_order_with_little_work_a_release() -> None:
    slots = HoldSlots(bound=1, capacity=2)
    served: list[int] = []

    async def hold(i: int) -> None:
        async with slots.slot("a"):
            served.append(i)
            await asyncio.sleep(0)

    started = time.perf_counter()
    tasks = [asyncio.create_task(hold(i)) for i in range(3000)]
    async with asyncio.timeout(30):
        await asyncio.gather(*tasks)
    took = time.perf_counter() - started
    assert served == list(range(3000))
    assert took < 1.5, f"{took:.2f} s for 3,000 waiters"  # every waiter woken: ~6 s


async def test_a_cancelled_waiter_passes_its_turn_on() -> None:
    slots = HoldSlots(bound=1, capacity=2)
    served: list[str] = []
    gate = asyncio.Event()

    async def hold(name: str) -> None:
        async with slots.slot("a"):
            served.append(name)
            if name == "h":
                await gate.wait()

    holder = asyncio.create_task(hold("h"))
    await asyncio.sleep(0)
    gone = asyncio.create_task(hold("gone"))
    kept = asyncio.create_task(hold("kept"))
    await asyncio.sleep(0)
    gate.set()
    await asyncio.sleep(0)  # the slot is passed to "gone", which is cancelled before it runs
    gone.cancel()
    async with asyncio.timeout(2):
        await asyncio.gather(holder, kept)
        await asyncio.gather(gone, return_exceptions=True)
    assert served == ["h", "kept"] and slots.users("a") == 0 and slots._total == 0


async def test_another_principal_waiting_is_served_when_its_share_frees() -> None:
    """Waiters of several principals: a release serves the first that may hold now, not the
    first in line that may not."""
    slots = HoldSlots(bound=2, capacity=4)
    served: list[str] = []
    gates = {name: asyncio.Event() for name in ("a1", "a2", "b1")}

    async def hold(principal: str, name: str) -> None:
        async with slots.slot(principal):
            served.append(name)
            if name in gates:
                await gates[name].wait()

    tasks = [asyncio.create_task(hold("a", "a1")), asyncio.create_task(hold("a", "a2"))]
    tasks.append(asyncio.create_task(hold("b", "b1")))
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(hold("a", "a3")))  # past a's bound
    tasks.append(asyncio.create_task(hold("b", "b2")))  # past b's share beside a
    await asyncio.sleep(0.01)
    assert served == ["a1", "a2", "b1"]
    gates["b1"].set()
    await asyncio.sleep(0.01)
    assert served[-1] == "b2"
    gates["a1"].set()
    gates["a2"].set()
    async with asyncio.timeout(2):
        await asyncio.gather(*tasks)
    assert sorted(served) == ["a1", "a2", "a3", "b1", "b2"] and slots._total == 0
