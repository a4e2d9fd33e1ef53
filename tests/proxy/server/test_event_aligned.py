"""``EventAligned``: an event stream passed on at event ends, whatever the reads; an event that
never ends costs time linear in its bytes (it was copied and searched whole at every read: 2.6 s
of the event loop a MiB read 256 bytes at a time), and goes as it came past ``MAX_HELD``. An
event the stream ends in without its blank line goes as its judge says: as it came, ended in the
stream's own line ends, or not at all."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable

import pytest

from proxy.server.event_aligned import MAX_HELD, EventAligned, event_end


def _as_came(tail: bytes, ended: bytes, torn: bool) -> bytes:
    return tail


async def _out(chunks: list[bytes], at_end: Callable[..., bytes | None] = _as_came) -> list[bytes]:
    async def gen() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return [piece async for piece in EventAligned(gen(), at_end)]


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


@pytest.mark.parametrize(
    ("events", "tail", "ended"),
    [
        (b"data: a\n\n", b"data: b", b"data: b\n\n"),
        (b"data: a\r\n\r\n", b"data: b", b"data: b\r\n\r\n"),  # the stream's own ends
        (b"data: a\r\r", b"data: b", b"data: b\r\r"),
        (b"", b"event: x\r\ndata: b", b"event: x\r\ndata: b\r\n\r\n"),  # its first line's
        (b"data: a\n\n", b"data: b\n", b"data: b\n\n"),  # only the blank line missing
        (b"data: a\r\n\r\n", b"data: b\r\n", b"data: b\r\n\r\n"),
    ],
)
def test_the_unfinished_event_is_judged_ended_in_the_streams_line_ends(
    events: bytes, tail: bytes, ended: bytes
) -> None:
    judged: list[tuple[bytes, bytes, bool]] = []

    def judge(got: bytes, got_ended: bytes, torn: bool) -> bytes | None:
        judged.append((got, got_ended, torn))
        return None

    pieces = asyncio.run(_out([events, tail[:3], tail[3:]] if events else [tail], judge))
    assert judged == [(tail, ended, False)]
    assert b"".join(pieces) == events  # dropped
    assert event_end(tail, events) == ended[len(tail) :]


def test_a_torn_event_says_so_until_an_event_ends() -> None:
    async def run(chunks: list[bytes]) -> list[bool]:
        async def gen() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield chunk

        aligner = EventAligned(gen(), lambda tail, ended, torn: ended)
        return [aligner.torn async for _ in aligner] + [aligner.torn]

    big = b"data: " + b"x" * MAX_HELD
    assert asyncio.run(run([big, b"y\n\n"])) == [True, False, False]
    assert asyncio.run(run([big, b"y"])) == [True, False, False]  # its end, judged, went
    assert asyncio.run(run([b"data: a\n\n", b"data: b"])) == [False, False, False]


def test_a_torn_event_the_stream_ends_in_as_it_went_is_judged_too() -> None:
    """The read that took an unfinished event past ``MAX_HELD`` was the stream's last: nothing is
    held at the end, but the event went unended all the same. Its end is judged (an empty tail,
    ended), else a client's parser never read it: the answer's last event, dropped."""
    judged: list[tuple[bytes, bytes, bool]] = []

    def judge(tail: bytes, ended: bytes, torn: bool) -> bytes | None:
        judged.append((tail, ended, torn))
        return ended

    big = b"data: " + b"x" * MAX_HELD
    pieces = asyncio.run(_out([b"data: a\r\n\r\n", big[:1000], big[1000:]], judge))
    assert judged == [(b"", b"\r\n\r\n", True)]
    assert b"".join(pieces) == b"data: a\r\n\r\n" + big + b"\r\n\r\n"
