"""A response's status line and headers sent with its first body bytes, in one write.

uvicorn writes the head of a response as soon as the app sends ``http.response.start`` and the
body on the next ``send``: two ``send()`` system calls and two TCP segments, so the client wakes
twice for one answer. Measured on loopback with this protocol and a trivial app (64 KB
request, small JSON answer, alternating runs): ~40–50 µs less server CPU a request with one
write (~210 → ~165 µs), and the client's p50 ~0.07 ms lower.

``HeadHold`` stands in for the connection's transport in one request's uvicorn cycle: the head
(the first write, unless it is an interim ``1xx``) is held and goes out joined with the next
write, the body's first bytes. Nothing waits on the app: if no body write follows in the same
turn of the event loop (an event stream whose first event is not there yet), the head is
flushed on the loop's next turn, before it waits for I/O; closing flushes it first too."""

from __future__ import annotations

import asyncio
from typing import Any

JOINED_MAX = 64 * 1024  # a first body write larger than this goes after the head, not joined


class HeadHold:
    """A transport proxy for one request/response cycle: ``write`` holds the head, ``close``
    flushes it, everything else is the connection's transport's own."""

    __slots__ = ("_head", "_loop", "_started", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._head: bytes | None = None
        self._started = False  # the head has been written (or is held)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._transport.is_closing():  # the client is gone: nothing to send it
            self._head = None
            return
        head = self._head
        if head is not None:  # the body's first bytes: one write for both
            self._head = None
            if len(data) > JOINED_MAX:  # not copied to be joined (a 60 MB answer: ~25 ms)
                self._transport.write(head)
                self._transport.write(data)
            else:
                self._transport.write(b"".join((head, data)))  # data may be any bytes-like
        elif not self._started and _is_final_head(data):
            self._started = True
            self._head = bytes(data)
            self._loop.call_soon(self.flush)  # at the latest before the loop next waits
        else:
            self._transport.write(data)

    def flush(self) -> None:
        head = self._head
        if head is not None:
            self._head = None
            if not self._transport.is_closing():
                self._transport.write(head)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:  # is_closing, get_extra_info …
        return getattr(self._transport, name)


def _is_final_head(data: bytes | bytearray | memoryview) -> bool:
    """A response's status line (not ``HTTP/1.1 100 Continue`` or another interim answer)."""
    return bytes(data[:9]) == b"HTTP/1.1 " and bytes(data[9:10]) != b"1"
