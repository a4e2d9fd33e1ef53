"""``event_aligned``: an event stream passed on at event ends, whatever the reads; an event that
never ends costs time linear in its bytes (it was copied and searched whole at every read: 2.6 s
of the event loop a MiB read 256 bytes at a time), and goes as it came past ``MAX_HELD``."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator

import pytest

from proxy.server.event_aligned import MAX_HELD, event_aligned


async def _out(chunks: list[bytes]) -> list[bytes]:
    async def gen() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return [piece async for piece in event_aligned(gen())]


def _cuts(data: bytes, rng: random.Random) -> list[bytes]:
    out, i = [], 0
    while i < len(data):
        n = rng.randint(1, 9)
        out.append(data[i : i + n])
        i += n
    return out


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("end", [b"\n\n", b"\r\n\r\n", b"\r\r"])
def test_every_piece_ends_at_an_event_end_and_nothing_is_lost(seed: int, end: bytes) -> None:
    rng = random.Random(seed)
    events = [b"data: " + bytes(rng.choice(b"abc:{}\r\n") for _ in range(rng.randint(0, 12)))
              .replace(b"\r", b"").replace(b"\n", b"") + end for _ in range(8)]  # fmt: skip
    data = b"".join(events) + b"data: unfinished"
    pieces = asyncio.run(_out(_cuts(data, rng)))
    assert b"".join(pieces) == data
    for piece in pieces[:-1]:
        assert piece.endswith(end)
    assert pieces[-1] == b"data: unfinished"


def test_an_event_that_never_ends_costs_linear_time() -> None:
    def seconds(reads: int) -> float:
        chunks = [b"data: " + b"x" * 250] * reads
        started = time.perf_counter()
        pieces = asyncio.run(_out(chunks))
        assert b"".join(pieces) == b"".join(chunks)
        return time.perf_counter() - started

    small, large = seconds(1024), seconds(8192)  # 8 times the bytes, past MAX_HELD
    assert MAX_HELD < 8192 * 256
    assert large < 1.0 and large < 24 * max(small, 1e-3), (small, large)
