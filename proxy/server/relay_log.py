"""The log row of a request that is not a model call (``POST /v1/embeddings``, ``/v1/moderations``,
the token counts ``/v1/messages/count_tokens`` and Gemini's ``:countTokens``): queued when the
request goes upstream (or when it fails before), completed when its answer has been sent, and
heard by the observers (the JSON log line, ``/metrics``) once, however the request ends.

Nothing is saved of these requests' sessions, so the row has no session, report or sections:
its principal, path, model (redacted, as a model request's), upstream, status, the time the proxy
took before the upstream call, the whole latency, the time to the upstream's head, the usage the
answer reports (an embeddings answer's ``prompt_tokens``, read from its last 64 KiB as it streams
through) and, for an error, its redacted text."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from starlette.types import Send

from proxy.errors import ClientGone, InternalError, ProxyError, ShuttingDown
from proxy.failures import STOPPING
from proxy.server.asgi_send import raw_headers, send_json
from proxy.server.asgi_send import request_id as new_request_id
from proxy.server.in_flight import retry_headers
from proxy.server.log_fields import completion_fields
from proxy.upstream.usage import TAIL_BYTES, last_usage
from rules.redact import redacted_prefix

if TYPE_CHECKING:
    from proxy.server.services import Services

MODEL_MAX = 256  # characters of a model name kept in the row, as a model request's bound

log = logging.getLogger("ctxproxy.relay")


class RelayLog:
    """One relayed request's row, from its start to the observers' ``finished``."""

    def __init__(self, services: Services, path: str, protocol: str) -> None:
        self.s = services
        self.started = time.perf_counter()
        self.row: dict[str, Any] = {
            "id": new_request_id(),
            "created_at": time.time(),
            "path": path,
            "protocol": protocol,
            "principal": "-",  # not known yet: a request refused before it names nobody
            "stream": 0,
        }
        self.ttfb_ms: float | None = None
        self._queued = False
        self._finished = False
        services.observers.started()

    def named(self, model: object) -> None:
        """The model the request names, redacted (a key pasted as the model stays out of the
        log), then cut: cut first, a secret the cut split lost what names it."""
        if isinstance(model, str):
            self.row["model"] = redacted_prefix(model, MODEL_MAX)

    def headers(self) -> dict[str, str]:
        """What every answer to the request carries: the row's id and the proxy's time."""
        overhead = self.row.get("overhead_ms")
        if overhead is None:
            overhead = (time.perf_counter() - self.started) * 1000
        return {
            "x-ctxproxy-request-id": self.row["id"],
            "x-ctxproxy-overhead-ms": f"{overhead:.3f}",
        }

    async def forwarding(self, upstream: str) -> None:
        """The upstream call begins: the row is queued with the proxy's time so far."""
        self.row["upstream"] = upstream
        await self._queue()

    def answered(self) -> None:
        """The upstream's head arrived."""
        self.ttfb_ms = (time.perf_counter() - self.started) * 1000

    async def finish(
        self,
        status: int,
        error: ProxyError | None = None,
        usage: dict[str, Any] | None = None,
        error_body: bytes | None = None,
    ) -> None:
        """The row completed (once: a later call does nothing) and the observers told."""
        if self._finished:
            return
        self._finished = True
        try:
            if isinstance(error, ClientGone):
                self.row["client_disconnected"] = 1
            await self._queue()
            fields = completion_fields(
                self.row, self.started, status, error, self.ttfb_ms, usage, error_body
            )
            await self.s.store.finish_request(self.row["id"], fields)
            self.row.update(fields)
        finally:
            self.s.observers.finished(self.row)

    async def _queue(self) -> None:
        if not self._queued:
            self._queued = True
            self.row["overhead_ms"] = round((time.perf_counter() - self.started) * 1000, 3)
            await self.s.store.insert_request(self.row)


async def send_answer(
    send: Send, status: int, headers: dict[str, str], content: bytes, logged: RelayLog
) -> None:
    """An upstream's whole JSON answer (a token count) sent with the row's headers, and the row
    completed: a count is no usage billed, an error's text is kept (redacted)."""
    head = raw_headers({**headers, "content-type": "application/json", **logged.headers()},
                       len(content))  # fmt: skip
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": content})
    await logged.finish(status, error_body=content if status >= 400 else None)


@contextlib.asynccontextmanager
async def answered_logged(
    logged: RelayLog, send: Send, shape: Callable[[ProxyError], bytes], what: str
) -> AsyncIterator[None]:
    """The request's failures answered in its protocol's shape (``shape``: an error's body),
    with the row's headers, and its row completed however it ends: a client gone, an error of
    the request or the upstream, the server stopping (raised on), a bug of ours (a 500, logged
    with its traceback)."""
    try:
        yield
    except ClientGone as exc:
        await logged.finish(exc.status, exc)
    except ProxyError as exc:
        try:
            headers = {**retry_headers(exc), **logged.headers()}
            await send_json(send, exc.status, shape(exc), headers)
        finally:
            await logged.finish(exc.status, exc)
    except STOPPING:
        gone = ShuttingDown()
        await logged.finish(gone.status, gone)
        raise
    except BaseException as exc:
        log.exception("%s failed inside the proxy", what)
        error = InternalError(exc)
        try:
            await send_json(send, error.status, shape(error), logged.headers())
        finally:
            await logged.finish(error.status, error)


class UsageTail:
    """The last ``TAIL_BYTES`` of an answer relayed piece by piece: where its ``usage`` is."""

    def __init__(self) -> None:
        self.data = bytearray()

    def add(self, piece: bytes) -> None:
        self.data += piece[-TAIL_BYTES:]
        if len(self.data) > TAIL_BYTES:
            del self.data[:-TAIL_BYTES]

    def usage(self) -> dict[str, Any] | None:
        return last_usage(self.data)
