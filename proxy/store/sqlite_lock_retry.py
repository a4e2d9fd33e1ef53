"""A SQLite start-up step that another process's lock may refuse at once: tried again, briefly."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiosqlite

T = TypeVar("T")


async def retry_locked(step: Callable[[], Awaitable[T]], *, deadline_s: float = 20.0) -> T:
    """Run a start-up step again while another process holds the file: switching to WAL takes an
    exclusive lock that SQLite may refuse at once, without waiting out the busy timeout."""
    loop = asyncio.get_running_loop()
    end, pause = loop.time() + deadline_s, 0.02
    while True:
        try:
            return await step()
        except aiosqlite.OperationalError as exc:
            if "locked" not in str(exc) or loop.time() + pause > end:
                raise
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.5)
