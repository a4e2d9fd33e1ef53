"""A streamed upstream answer relayed to the client as it comes: the usage read on the way
(the cache's feedback), the response id noted, the log row completed however the stream ends
(complete, broken off upstream, or the client gone)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

import orjson
from starlette.types import Send

from proxy.attribution.ledger import Pending
from proxy.errors import InternalError, ProxyError, ShuttingDown, UpstreamUnreachable
from proxy.server.answer_end import AnswerEnd
from proxy.server.asgi_send import raw_headers
from proxy.server.disconnect_watch import DisconnectWatch
from proxy.server.event_aligned import EventAligned, event_end
from proxy.server.feedback import note_cache_usage, with_cache_line
from proxy.server.log_fields import CAPTURE_MAX_BYTES
from proxy.server.provider_refs import AnswerReader
from proxy.server.services import Services
from proxy.server.stream_deadline import bounded
from proxy.server.wire import Wire
from proxy.upstream import UpstreamResponse
from proxy.upstream.sse_usage import UsageTap
from proxy.upstream.transport import is_event_stream
from proxy.upstream.usage import CacheUsage, cache_usage
from rules.redact import redact_text


class Handler(Protocol):
    """What the relay uses of ``handler.ProtocolHandler``."""

    @property
    def s(self) -> Services: ...

    @property
    def wire(self) -> Wire: ...

    @property
    def _fields(self) -> Callable[..., dict[str, Any]]: ...

    async def _unsendable(
        self, send: Send, exc: Exception, row: dict[str, Any], started: float
    ) -> None: ...

    async def _finish(self, row: dict[str, Any], fields: dict[str, Any]) -> None: ...


log = logging.getLogger("ctxproxy.handler")
CUT = "The proxy shut down while the answer streamed (server.shutdown_timeout_s passed)."
UNFINISHED = "The upstream ended its stream before the answer's last event: the answer is cut."


def unfinished(response: UpstreamResponse, tap: UsageTap, answered: AnswerEnd) -> bool:
    """An event stream that ended without its answer's last event, and without an error event
    of the provider's saying why: the upstream broke off (a connection closed mid-answer reads as
    an end of a body that had no length), and a client taking it for a whole answer would act
    on a cut tool call."""
    return (
        response.status < 400
        and response.error_tail is None
        and is_event_stream(response.headers)
        and tap.error is None
        and not answered.seen()
    )


async def relay_stream(
    handler: Handler,
    send: Send,
    response: UpstreamResponse,
    row: dict[str, Any],
    started: float,
    out_headers: dict[str, str],
    watch: DisconnectWatch,
    ids: AnswerReader | None = None,
    pending: Pending | None = None,
) -> None:
    """Relay upstream bytes as they come; complete the log row however the stream ends."""
    assert response.chunks is not None
    tap = response.tap() if response.tap is not None else UsageTap()
    noted: dict[str, Any] | None = None  # the usage handed on as the cache's feedback
    reported: CacheUsage | None = None  # what it says of the cache (``cache_usage``)
    ttfb: float | None = None
    error: ProxyError | None = None
    complete = False
    answered = AnswerEnd()  # the answer's last event was sent: the client may close early
    last = b""  # the last piece relayed: an error event after it follows its numbering
    status = response.status
    captured: list[bytes] | None = [] if handler.s.settings.store.capture_payloads else None
    captured_bytes = 0  # all the answer's: past CAPTURE_MAX_BYTES the log says how many more
    try:
        head = raw_headers({**response.headers, **out_headers}, None)
    except Exception as exc:
        if response.close is not None:
            await response.close()
        await handler._unsendable(send, exc, row, started)
        return
    try:
        await send({"type": "http.response.start", "status": status, "headers": head})
        try:
            limit_s = handler.s.settings.limits.stream_max_s
            chunks = bounded(response.chunks, limit_s)
            # an SSE stream cut at event ends: an error event after a break is read as one
            aligner = None
            if response.error_tail is None:
                judge = partial(_tail_sent, response)
                aligner = EventAligned(chunks, judge)
            async for chunk in chunks if aligner is None else aligner:
                if ttfb is None:
                    ttfb = (time.perf_counter() - started) * 1000
                try:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                finally:  # read once relayed: the client does not wait on the usage tap
                    tap.feed(chunk)
                    if ids is not None:  # until the response id is found: one chunk
                        ids.feed(chunk)
                    if tap.usage is not None and tap.usage is not noted:
                        # Gemini repeats its usage in every chunk: noted again only if changed
                        if tap.usage != noted:
                            reading = cache_usage(tap.usage)
                            if reading != reported:
                                note_cache_usage(handler.s.store, row, status, reading)
                            reported = reading
                        noted = tap.usage
                    if captured is not None:
                        if captured_bytes < CAPTURE_MAX_BYTES:  # what the log keeps, at most
                            captured.append(chunk)
                        captured_bytes += len(chunk)
                answered.feed(chunk)  # sent
                if not _comment_only(chunk):  # what an error event is numbered after
                    last = chunk
            complete = True
            if unfinished(response, tap, answered):
                raise UpstreamUnreachable(UNFINISHED)
        except ProxyError as exc:  # upstream broke off: tell the client in the stream, end
            error = exc
            if response.error_tail is not None:  # not SSE: the stream's own ending
                event = response.error_tail(handler.wire.error_body(exc))
            else:
                event = handler.wire.stream_error(exc, last)
                if aligner is not None and aligner.torn:  # an event's start went: end it first
                    event = event_end(last) + event
            await send({"type": "http.response.body", "body": event, "more_body": True})
        watch.stop()  # from here on, uvicorn reports the end of the response as a disconnect
        await send({"type": "http.response.body", "body": b""})
    except asyncio.CancelledError:
        if not watch.ours():  # the server's: its shutdown bound passed with the stream running
            error = ShuttingDown(CUT)
            raise
    except BaseException as exc:  # the response could not be sent (e.g. the server refused)
        if ttfb is None and not complete and error is None:
            log.error("request %s: the response could not be sent: %r", row["id"], exc)
            error = InternalError(exc)
            status = error.status
        raise
    finally:
        if response.close is not None:
            await response.close()
        if not complete and error is None and not answered.seen():
            row["client_disconnected"] = 1
        body = b"".join(captured) if captured is not None else None
        if tap.usage is not noted:  # read after the last chunk noted (or never noted)
            reported = cache_usage(tap.usage)
        fields = handler._fields(
            row, started, status, error, ttfb, tap.usage, body, reported=reported,
            response_total=captured_bytes,
        )  # fmt: skip
        if error is None and tap.error is not None:  # the provider's own error event, relayed
            fields.update(error_type="upstream_stream_error", error=redact_text(tap.error))
        answer = {"id": tap.answer_id, **(tap.diagnostics or {})}
        ledger = handler.s.engine.ledger
        fields = with_cache_line(fields, ledger, pending, row, status, reported, answer)
        await handler._finish(row, fields)


def _comment_only(chunk: bytes) -> bool:
    """A read of keep-alive comments only (``: ping``): no event to number an error after."""
    return chunk[:1] == b":" and all(not line or line[:1] == b":" for line in chunk.splitlines())


def _tail_sent(response: UpstreamResponse, tail: bytes, ended: bytes, torn: bool) -> bytes | None:
    """What is sent of an event the upstream ended its stream in without its blank line: the
    event, ended, if only the blank line is missing (its data is whole: a client's parser reads
    it once ended), or its start went already; nothing if it was cut (the answer's end judges
    whether an error event follows, and it follows an event's end). The body of an error status,
    or one not an event stream, goes as it came."""
    if response.status >= 400 or not is_event_stream(response.headers):
        return tail
    if torn or _comment_only(ended) or _data_whole(ended):
        return ended
    return None


def _data_whole(event: bytes) -> bool:
    """Whether an event's data is whole: JSON that parses, or the chat stream's ``[DONE]`` (every
    protocol relayed sends JSON). Read once a stream, of at most ``MAX_HELD`` bytes."""
    lines = [line for line in event.splitlines() if line == b"data" or line[:5] == b"data:"]
    data = b"\n".join(line[6:] if line[5:6] == b" " else line[5:] for line in lines)
    if not data.strip() or data == b"[DONE]":
        return bool(lines)
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True
