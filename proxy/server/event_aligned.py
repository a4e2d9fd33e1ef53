"""An event stream relayed event by event: each read is passed on up to its last complete event,
the rest held until the event it began ends. When the upstream breaks off mid-event, what was
relayed ends at an event's end, so the error event the proxy appends is read as one (glued onto a
half-sent ``data:`` line, a client's parser saw neither that event nor the error). An event
longer than ``MAX_HELD`` is passed on as it comes, as every event was before.

When the stream ends cleanly with an event unfinished (no blank line after it), that event is
not passed on as it came: ``at_end`` judges it, since only the relay knows whether the answer it
ends is whole (the provider's last event, sent without its blank line, is: it goes, ended) or cut
(then it is dropped, and the error event follows an event's end)."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable

from proxy.upstream.error_scan import last_event_end

MAX_HELD = 1 << 20  # bytes of an unfinished event held back at most
_ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")


class EventAligned:
    """``chunks`` cut at event ends; a failure of ``chunks`` drops the unfinished event. The
    unfinished event is held as its pieces, and each read is searched alone (with the few bytes
    before it an end may begin in): an event that never ends, read 256 bytes at a time, was
    copied and searched whole at every read, 2.6 s of the event loop a MiB.

    After a clean end, the unfinished event's bytes not passed on go as ``at_end`` returns them,
    given them as they came and ended in the stream's own line ends (it is called once the pieces
    before are relayed). ``torn``: an unfinished event's start went
    already (it grew past ``MAX_HELD``), so an error event must end it first."""

    __slots__ = ("_at_end", "_chunks", "_ended", "last", "torn")

    def __init__(
        self, chunks: AsyncIterable[bytes], at_end: Callable[[bytes, bytes, bool], bytes | None]
    ) -> None:
        self._chunks = chunks
        self._at_end = at_end
        self.last = b""  # the last piece passed on: how its events end
        self._ended = b""  # the last piece passed on that ended an event: the stream's line ends
        self.torn = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        held: list[bytes] = []
        size = 0
        async for chunk in self._chunks:
            if not held and chunk.endswith(_ENDS):  # a read of whole events (most upstreams)
                self.torn = False
                self.last = self._ended = chunk
                yield chunk
                continue
            # an end may begin in the held bytes' last three (each piece holds one at least)
            before = b"".join(held[-3:])[-3:] if held else b""
            window = before + chunk if before else chunk
            cut = last_event_end(window, len(window)) - len(before)
            if cut > 0:
                out = b"".join([*held, chunk[:cut]]) if held else chunk[:cut]
                held, size = [], 0
                self.torn = False
                self.last = self._ended = out
                yield out
                chunk = chunk[cut:]
                if not chunk:
                    continue
            held.append(chunk)
            size += len(chunk)
            if size > MAX_HELD:
                out = b"".join(held)
                held, size = [], 0
                self.torn = True
                self.last = out
                yield out
        # a torn event is unended too when the read that passed it on was the stream's last
        if held or self.torn:
            tail = b"".join(held)
            ended = tail + event_end(tail, self._ended if self.torn else self.last)
            if sent := self._at_end(tail, ended, self.torn):
                self.torn = not sent.endswith(_ENDS)
                self.last = sent
                yield sent


def event_end(unfinished: bytes, before: bytes = b"") -> bytes:
    """The bytes that end the event ``unfinished`` leaves open, in the stream's own line ends
    (its lines', else those of the event ``before`` it): a CR it ends in is a CRLF's start in a
    stream of CRLFs."""
    if unfinished.endswith((b"\r\n", b"\n")):
        return unfinished[-2:] if unfinished.endswith(b"\r\n") else b"\n"
    newline = b"\n"
    for text in (unfinished[:-1] if unfinished.endswith(b"\r") else unfinished, before[-2:]):
        if b"\r\n" in text or b"\r" in text or b"\n" in text:
            newline = b"\r\n" if b"\r\n" in text else b"\r" if b"\r" in text else b"\n"
            break
    if unfinished.endswith(b"\r"):
        return b"\n\r\n" if newline == b"\r\n" else b"\r"
    return newline * 2
