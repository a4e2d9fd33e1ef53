"""A total bound on a streamed answer (``limits.stream_max_s``). The upstream's read timeout is
per read: an upstream that sends a keep-alive comment or a few bytes every few seconds, forever,
never trips it, and would hold the client's connection, the session and an upstream connection
with no end. Only the waits for the upstream's next bytes are cut, not a send to the client (a
client taking none of its answer is cut off by the server's protocol: ``server.
write_stall_timeout_s``): past the bound, the next wait ends it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager

from proxy.errors import StreamTooLong


class _Deadline:
    """One timer per stream (``asyncio.timeout`` around each read costs ~9 µs a chunk): when it
    fires during a read, it cancels the task, which the read's ``CancelledError`` tells."""

    __slots__ = ("expired", "fired", "reading", "task")

    def __init__(self, task: asyncio.Task[object]) -> None:
        self.task = task
        self.reading = False
        self.expired = False
        self.fired = False  # the task was cancelled by us

    def expire(self) -> None:
        self.expired = True
        if self.reading:
            self.fired = True
            self.task.cancel()


async def bounded(chunks: AsyncIterable[bytes], limit_s: float) -> AsyncIterator[bytes]:
    """``chunks`` until ``limit_s`` seconds have passed since the first was asked for, then
    ``StreamTooLong`` (the wait for the next chunk cancelled, which ends the upstream's stream).
    ``limit_s`` 0: ``chunks`` unbounded."""
    task = asyncio.current_task()
    if not limit_s or task is None:
        async for chunk in chunks:
            yield chunk
        return
    deadline = _Deadline(task)
    timer = asyncio.get_running_loop().call_later(limit_s, deadline.expire)
    source = aiter(chunks)
    try:
        while not deadline.expired:
            deadline.reading = True
            try:
                chunk = await anext(source)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                # ours alone (no other cancel pending, e.g. the client gone): the bound
                if deadline.fired and task.uncancel() == 0:
                    break
                raise
            finally:
                deadline.reading = False
            yield chunk
    finally:
        timer.cancel()
    raise StreamTooLong(
        f"The answer streamed longer than limits.stream_max_s ({limit_s:g} s) and was cut."
    )


@asynccontextmanager
async def answer_bound(limit_s: float) -> AsyncIterator[None]:
    """The wait for an answer (a whole answer when not streamed, a stream's head) within
    ``limit_s``, else ``StreamTooLong``: a non-streamed answer dripped a byte at a time (a
    gateway's whitespace keep-alive) never trips the per-read timeout either. 0: no bound."""
    if not limit_s:
        yield
        return
    try:
        async with asyncio.timeout(limit_s) as bound:
            yield
    except TimeoutError:
        if not bound.expired():
            raise
        raise StreamTooLong(
            f"The upstream's answer was still coming after {limit_s:g} s (limits.stream_max_s)."
        ) from None
