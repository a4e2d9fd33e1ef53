"""A compressed answer decodes while data is at hand, so its pieces come with no wait for the
socket between them and the relay's work on them ran back to back: a 1 MB gzip of a 256 MiB
event stream held the event loop for seconds. The body's reader lets the loop go every
``YIELD_BYTES``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from proxy.upstream.transport import YIELD_BYTES, raw_chunks

PIECE = 64 * 1024
TOTAL = 8 * 1024 * 1024


class _Content:
    async def iter_any(self) -> AsyncIterator[bytes]:
        for _ in range(TOTAL // PIECE):
            yield b"x" * PIECE  # decoded data at hand: never waits


class _Response:
    content = _Content()


async def test_the_reader_lets_the_loop_go_while_data_is_at_hand() -> None:
    turns = 0
    done = False

    async def ticker() -> None:
        nonlocal turns
        while not done:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    started = turns
    got = 0
    response: Any = _Response()
    async for chunk in raw_chunks(response, "up"):
        got += len(chunk)
    done = True
    await task
    assert got == TOTAL
    assert turns - started >= TOTAL // YIELD_BYTES - 1
