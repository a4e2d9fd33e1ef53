"""A litellm stream as the relay takes it: opened before the answer's status is sent, and
bounded between its reads.

- **Opened.** Some of litellm's providers (Gemini's among them) make the HTTP call on the
  stream's first read, so a 429 or a 400 would surface only after the proxy had answered 200: the
  client got an error event in a successful stream and no ``retry-after``. The first item is read
  before the status is chosen (``opened``), within the caller's handling of litellm's failures.
- **Bounded.** Not every litellm call applies the upstream's ``timeout_s`` (Gemini's
  ``google_genai`` path does not): each read waits at most that long (``opened``), so a
  silent upstream ends in a timeout, not after ``stream_max_s``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from proxy.errors import ProxyError, UpstreamTimeout
from proxy.settings import UpstreamSettings

MAX_MADE_HERE = 2  # leading items of litellm's own read past before the call's first


def _silent(upstream: UpstreamSettings) -> UpstreamTimeout:
    return UpstreamTimeout(f"Upstream {upstream.name} timed out.")


async def opened(
    stream: Any,
    upstream: UpstreamSettings,
    made_here: Callable[[Any], bool] | None = None,
    failed: Callable[[Any], ProxyError | None] | None = None,
) -> AsyncIterator[Any]:
    """``stream`` with its first item read already (litellm's exceptions from that read rise
    here, to the caller's ``try``), every read bounded by the upstream's ``timeout_s``. Items
    ``made_here`` says litellm wrote before any call (its Messages adapter's ``message_start``)
    are read past too, up to ``MAX_MADE_HERE``: the call is made by the read after them. An
    item ``failed`` reads as the call's failure (an error event litellm wrote for it) raises
    that error: the client gets the status, not a stream."""
    reads = stream.__aiter__()
    held: list[Any] = []
    try:
        while True:
            async with asyncio.timeout(upstream.timeout_s):
                item = await reads.__anext__()
            held.append(item)
            if made_here is None or not made_here(item) or len(held) > MAX_MADE_HERE:
                break
    except StopAsyncIteration:
        pass
    except TimeoutError:
        await close(reads)
        raise _silent(upstream) from None
    except BaseException:
        await close(reads)
        raise
    error = failed(held[-1]) if failed is not None and held else None
    if error is not None:
        await close(reads)
        raise error
    return _Rest(held, reads, upstream)


async def close(reads: Any) -> None:
    """litellm's stream closed (its HTTP response let go), whatever ended the relay of it."""
    shut = getattr(reads, "aclose", None)
    if shut is None:
        return
    try:
        await shut()
    except Exception:  # closing a stream that failed: nothing more to tell
        return


class _Rest:
    """What ``opened`` read first, then the rest of the stream, each read bounded; closing it
    (the relay does, however it ends) closes litellm's stream, read from or not."""

    def __init__(self, held: list[Any], reads: Any, upstream: UpstreamSettings) -> None:
        self._held, self._reads, self._upstream = held, reads, upstream

    def __aiter__(self) -> _Rest:
        return self

    async def __anext__(self) -> Any:
        if self._held:
            return self._held.pop(0)
        try:
            async with asyncio.timeout(self._upstream.timeout_s):
                return await self._reads.__anext__()
        except TimeoutError:
            await self.aclose()
            raise _silent(self._upstream) from None
        except StopAsyncIteration:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        await close(self._reads)
