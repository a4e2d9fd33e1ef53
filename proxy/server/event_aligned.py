"""An event stream relayed event by event: each read is passed on up to its last complete event,
the rest held until the event it began ends. When the upstream breaks off mid-event, what was
relayed ends at an event's end, so the error event the proxy appends is read as one (glued onto a
half-sent ``data:`` line, a client's parser saw neither that event nor the error). An event
longer than ``MAX_HELD`` is passed on as it comes, as every event was before."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

from proxy.upstream.error_scan import last_event_end

MAX_HELD = 1 << 20  # bytes of an unfinished event held back at most
_ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")


async def event_aligned(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """``chunks`` cut at event ends; a failure of ``chunks`` drops the unfinished event. The
    unfinished event is held as its pieces, and each read is searched alone (with the few bytes
    before it an end may begin in): an event that never ends, read 256 bytes at a time, was
    copied and searched whole at every read, 2.6 s of the event loop a MiB."""
    held: list[bytes] = []
    size = 0
    async for chunk in chunks:
        if not held and chunk.endswith(_ENDS):  # a read of whole events (most upstreams)
            yield chunk
            continue
        # an end may begin in the held bytes' last three (each piece holds one at least)
        before = b"".join(held[-3:])[-3:] if held else b""
        window = before + chunk if before else chunk
        cut = last_event_end(window, len(window)) - len(before)
        if cut > 0:
            out = b"".join([*held, chunk[:cut]]) if held else chunk[:cut]
            held, size = [], 0
            yield out
            chunk = chunk[cut:]
            if not chunk:
                continue
        held.append(chunk)
        size += len(chunk)
        if size > MAX_HELD:
            out = b"".join(held)
            held, size = [], 0
            yield out
    if held:
        yield b"".join(held)
