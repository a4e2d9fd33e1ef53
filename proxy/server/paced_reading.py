"""How a connection's bytes are parsed: in slices, a bounded amount a turn of the event loop,
and not at all while the connection's requests are backed up. httptools parses all it is given,
calling back for every request and body piece in it: one 256 KiB read of back-to-back requests
queued 7,000 of them past the pipeline's bound (0.5 s of the loop in one call), and a body in
1-byte chunks, each added to the body as it came (``bytes +=``), held the loop ~190 ms a read.
What cannot be parsed yet is held (one read at most: reading stays paused meanwhile) and parsed
when the requests ahead are answered or their body is read."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT, FlowControl
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_PIPELINED = 8  # requests a connection may queue behind the one being answered
# A read (256 KiB) is parsed this much at a time outside a body, so a full pipeline stops the
# parse within a few hundred requests; a body's known rest is parsed in one piece.
FEED_SLICE = 4096
FEED_TURN = 64 * 1024  # parsed in one turn of the event loop at most, a body's known rest aside
BODY_HELD = HIGH_WATER_LIMIT  # a request's body unread past this: uvicorn pauses reading


class _HoldingFlow(FlowControl):
    """uvicorn's flow control, reading kept paused while a connection holds bytes unparsed: a
    request's ``receive`` and each answer resume it, and each resumption added a read to what
    was held (32 MB within seconds of pipelined small POSTs). Such a resumption asks for what
    is held to be parsed instead (``wanted``)."""

    def __init__(
        self, transport: asyncio.Transport, held: Callable[[], bool], wanted: Callable[[], None]
    ) -> None:
        super().__init__(transport)
        self._held = held
        self._wanted = wanted

    def resume_reading(self) -> None:
        if self._held():
            self._wanted()
        else:
            super().resume_reading()


class PacedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol, its reads parsed as the module says. ``_holding`` and
    ``_releasing`` tell a subclass when parsing stops for a backlog and starts again."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # bytes read but not parsed while the connection is backed up (reading paused meanwhile:
        # one read, 256 KiB, and what was in flight)
        self._held: bytearray | None = None
        self._body_left = 0  # the current request's declared body bytes not yet parsed
        self._body_parts: list[bytes] = []  # parsed body pieces, added to the body per slice
        self._feed_due = False  # ``_feed_held`` is scheduled
        self._message_done = True  # the newest request's body has all arrived

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow = _HoldingFlow(transport, lambda: self._held is not None, self._want_held)

    def data_received(self, data: bytes) -> None:
        if self._held is not None:  # read before the pause took: behind what is held, in order
            self._held += data
            self.flow.pause_reading()
            return
        self._feed(memoryview(data))

    def _feed(self, data: memoryview) -> None:
        """Parse ``data`` in slices, holding the rest while MAX_PIPELINED requests wait or a
        request's body waits unread past uvicorn's 64 KiB: httptools parses all it is given,
        and one read of back-to-back requests queued 7,000 of them (0.5 s of the event loop in
        one call; 40,000 cycles held)."""
        start, end = 0, len(data)
        while start < end:
            turn_over = start >= FEED_TURN  # the rest in a later turn of the loop
            if turn_over or self._backlogged():
                self._held = bytearray(data[start:])
                self.flow.pause_reading()
                self._holding()
                if turn_over:
                    self._want_held()
                return
            size = max(FEED_SLICE, self._body_left)
            super().data_received(data[start : start + size])  # type: ignore[arg-type]
            self._flush_body()
            if self.transport.is_closing():
                return
            start += size

    def _backlogged(self) -> bool:
        if len(self.pipeline) >= MAX_PIPELINED:
            return True
        cycle = self.cycle
        return cycle is not None and not cycle.response_complete and len(cycle.body) > BODY_HELD

    def _want_held(self) -> None:
        if not self._feed_due:
            self._feed_due = True
            self.loop.call_soon(self._feed_held)

    def _feed_held(self) -> None:
        self._feed_due = False
        held, self._held = self._held, None
        if held is None or self.transport.is_closing():
            return
        self._releasing()
        self._feed(memoryview(held))
        if self._held is None and not self._backlogged():
            self.flow.resume_reading()

    def _holding(self) -> None:
        """Parsing stops with bytes held (a subclass's hook)."""

    def _releasing(self) -> None:
        """Held bytes are about to be parsed (a subclass's hook)."""

    def on_headers_complete(self) -> None:
        self._body_left = _content_length(self.headers)
        self._message_done = False
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        """A response complete before its request's body (a 404, a 405, a model list, a count's
        408): the connection closes. Kept open, uvicorn went on reading the body to reach the
        next request, for as long as a client trickled it (300 s and more, past
        ``limits.body_read_timeout_s``; a thousand such connections held from two addresses).
        A pipelined request behind it means its body had ended."""
        if not self._message_done and not self.pipeline and not self.transport.is_closing():
            self.server_state.total_requests += 1
            self.transport.close()
            return
        super().on_response_complete()

    def on_body(self, body: bytes) -> None:
        """uvicorn's, gathered per slice: it adds each piece to the request's body (``bytes +=``),
        and a body sent in 1-byte chunks made that quadratic (a 256 KiB read held the event
        loop 33 ms; four such clients, 0.8 s)."""
        self._body_left -= len(body)
        cycle = self.cycle
        if not cycle.response_complete and not (
            self.parser.should_upgrade() and self._should_upgrade()
        ):
            self._body_parts.append(body)

    def _flush_body(self) -> None:
        if not self._body_parts:
            return
        data = b"".join(self._body_parts)
        self._body_parts.clear()
        cycle = self.cycle
        cycle.body += data
        if len(cycle.body) > BODY_HELD:
            self.flow.pause_reading()
        cycle.message_event.set()

    def on_message_complete(self) -> None:
        self._body_left = 0
        self._message_done = True
        self._flush_body()
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._held = None
        super().connection_lost(exc)


def _content_length(headers: list[tuple[bytes, bytes]]) -> int:
    """The declared body length (0 when chunked, absent or not a plain number)."""
    for name, value in headers:
        if name == b"content-length":
            return int(value) if value.isdigit() and len(value) <= 18 else 0
    return 0
