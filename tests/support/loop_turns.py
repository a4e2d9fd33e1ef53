"""How many times the event loop turned while some work ran: a task that counts its turns,
for tests that work on large input lets the loop serve others between its pieces."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class Turns:
    def __init__(self) -> None:
        self.count = 0
        self.done = False

    async def tick(self) -> None:
        while not self.done:
            self.count += 1
            await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def counted_turns() -> AsyncIterator[Turns]:
    """The loop's turns from entry to exit (``.count`` once the block is left)."""
    turns = Turns()
    task = asyncio.ensure_future(turns.tick())
    await asyncio.sleep(0)
    started = turns.count
    try:
        yield turns
    finally:
        turns.done = True
        await task
        turns.count -= started
