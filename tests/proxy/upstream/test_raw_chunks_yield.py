"""A compressed answer decodes while data is at hand, so its pieces come with no wait for the
socket between them and the relay's work on them ran back to back: a 1 MB gzip of a 256 MiB
event stream held the event loop for seconds. The body's reader lets the loop go every
``YIELD_BYTES``, and so does the reader of a whole answer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from proxy.upstream.transport import YIELD_BYTES, raw_chunks, read_bounded
from tests.support.loop_turns import counted_turns

PIECE = 64 * 1024
TOTAL = 8 * 1024 * 1024


class _Content:
    async def iter_any(self) -> AsyncIterator[bytes]:
        for _ in range(TOTAL // PIECE):
            yield b"x" * PIECE  # decoded data at hand: never waits


class _Response:
    content = _Content()


async def test_the_reader_lets_the_loop_go_while_data_is_at_hand() -> None:
    got = 0
    response: Any = _Response()
    async with counted_turns() as turns:
        async for chunk in raw_chunks(response, "up"):
            got += len(chunk)
    assert got == TOTAL
    assert turns.count >= TOTAL // YIELD_BYTES - 1


class _Decoding:
    async def iter_any(self) -> AsyncIterator[bytes]:
        for _ in range(TOTAL // PIECE):
            spin = time.thread_time() + 0.0005  # the decoder's work on a piece at hand (CPU)
            while time.thread_time() < spin:
                pass
            yield b"x" * PIECE


class _Compressed:
    content = _Decoding()
    headers: ClassVar[dict[str, str]] = {"content-encoding": "gzip"}
    content_length = 200_000  # the compressed length: says nothing of the decoded size


async def test_a_whole_answer_read_lets_the_loop_go_and_stops_at_its_bound() -> None:
    """A whole (not streamed) compressed answer was read back to back: a 200 KB gzip of 300 MB
    held the loop 250-320 ms before it was refused."""
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        # the thread's CPU between the loop's turns: the decoding it waited behind, not the
        # time the OS gave other processes (a loaded machine preempted it for 67 ms)
        last = time.thread_time()
        while not done:
            await asyncio.sleep(0)
            now = time.thread_time()
            gaps.append(now - last)
            last = now

    task = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    response: Any = _Compressed()
    body, whole = await read_bounded(response, TOTAL - 5)
    done = True
    await task
    assert not whole and len(body) == TOTAL - 5
    assert len(gaps) >= 5  # the loop had turns while it was read (64 ms of decoding)
    assert max(gaps) < 0.03
