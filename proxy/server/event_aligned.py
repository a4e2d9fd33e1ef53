"""An event stream relayed event by event: each read is passed on up to its last complete event,
the rest held until the event it began ends. When the upstream breaks off mid-event, what was
relayed ends at an event's end, so the error event the proxy appends is read as one (glued onto a
half-sent ``data:`` line, a client's parser saw neither that event nor the error). An event
longer than ``MAX_HELD`` is passed on as it comes, as every event was before."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

from proxy.upstream.error_redaction import last_event_end

MAX_HELD = 1 << 20  # bytes of an unfinished event held back at most
_ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")


async def event_aligned(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """``chunks`` cut at event ends; a failure of ``chunks`` drops the unfinished event."""
    held = b""
    async for chunk in chunks:
        data = held + chunk if held else chunk
        if data.endswith(_ENDS):  # a read of whole events (most upstreams)
            held = b""
            yield data
            continue
        cut = last_event_end(data, len(data))
        if cut > 0:
            held = data[cut:]
            yield data[:cut]
        elif len(data) > MAX_HELD:
            held = b""
            yield data
        else:
            held = data
    if held:
        yield held
