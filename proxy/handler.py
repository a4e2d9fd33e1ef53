"""POST /v1/chat/completions: authenticate, parse, rewrite, log, forward, relay.

The log row is queued before the upstream call and completed in ``finally`` (status, latency, time
to first byte, usage), also when the client goes away mid-stream."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import orjson
from starlette.types import Receive, Scope, Send

from proxy.auth import check_client
from proxy.engine import Engine, parse_body
from proxy.errors import ModelNotFound, PayloadTooLarge, ProxyError, RequestTimeout
from proxy.observe import Observers
from proxy.redact import redact, redact_text
from proxy.settings import Settings
from proxy.sse_usage import UsageTap
from proxy.store import Store
from proxy.upstream import UpstreamClient, UpstreamResponse, upstream_api_key

log = logging.getLogger("ctxproxy.handler")
CLIENT_CLOSED = 499  # nginx's status for "client closed the request", as logged, never sent


class ShuttingDown(ProxyError):
    """Logged when the server cancels a request it had not forwarded yet (shutdown)."""

    status = 503
    error_type = "server_error"
    code = "shutting_down"

    def __init__(self) -> None:
        super().__init__("The proxy shut down before the request was forwarded.")


class ClientGone(ProxyError):
    """Logged (status 499), never sent: there is nobody left to send it to."""

    status = CLIENT_CLOSED
    error_type = "client_error"
    code = "client_disconnected"


@dataclass
class Services:
    """What the handler needs, built once by the app's lifespan."""

    settings: Settings
    store: Store
    engine: Engine
    upstream: UpstreamClient
    observers: Observers = field(default_factory=Observers)


def usage_fields(usage: dict[str, Any] | None) -> dict[str, Any]:
    """Usage as logged: prompt/completion tokens and cached tokens in any provider's spelling."""
    if not isinstance(usage, dict):
        return {}
    details = usage.get("prompt_tokens_details") or {}
    cached = (
        (details.get("cached_tokens") if isinstance(details, dict) else None)
        or usage.get("prompt_cache_hit_tokens")
        or usage.get("cache_read_input_tokens")
        or 0
    )
    return {
        "usage": usage,
        "prompt_tokens": _count(usage.get("prompt_tokens")),
        "completion_tokens": _count(usage.get("completion_tokens")),
        "cached_tokens": _count(cached) or 0,
    }


def _count(value: Any) -> int | None:
    """A token count as an INTEGER column takes it: whatever else an upstream sends is logged
    in ``usage`` as it came, never in the column (a list there would stop the writer)."""
    if type(value) is int and 0 <= value < 2**63:
        return value
    return None


class ChatCompletions:
    """A raw ASGI app (the hot path skips Starlette's routing and middleware, ~0.15 ms a request).
    Log rows are completed after the response is sent, so the client never waits on the log."""

    def __init__(self, services: Services) -> None:
        self.s = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        request_id = "req_" + uuid.uuid4().hex[:24]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        row: dict[str, Any] = {"id": request_id, "created_at": time.time(), "path": scope["path"]}
        self.s.observers.started()
        try:
            check_client(self.s.settings.auth, headers)
            raw = await self._read_body(receive, headers)
            body = parse_body(raw, self.s.settings.limits.max_body_bytes)
            row.update(model=body["model"], stream=int(bool(body.get("stream"))))
            upstream = self.s.settings.upstream_for(body["model"])
            if upstream is None:
                raise ModelNotFound(
                    f"The model '{body['model']}' is not served by any configured upstream.",
                    param="model",
                )
            rewritten = await self.s.engine.rewrite(
                body, headers, now=row["created_at"], raw_size=len(raw)
            )
            report = rewritten.report
            overhead_ms = (time.perf_counter() - started) * 1000
            row.update(
                session_id=rewritten.session_id,
                parent_session_id=rewritten.parent_session_id,
                upstream=upstream.name,
                tokens_before=report["tokens"]["before"],
                tokens_after=report["tokens"]["after"],
                sections=report.get("sections"),
                report=report,
                overhead_ms=round(overhead_ms, 3),
            )
            if self.s.settings.store.capture_payloads:
                row["request_body"] = orjson.dumps(redact(body)).decode()
                row["forwarded_body"] = orjson.dumps(redact(rewritten.body)).decode()
        except ClientGone as exc:  # the client went away while sending its body
            row["client_disconnected"] = 1
            await self._fail_early(send, exc, row, started)
            return
        except ProxyError as exc:
            await self._fail_early(send, exc, row, started)
            return
        except Exception as exc:  # a bug of ours: answer in OpenAI's shape, keep the traceback
            log.exception("request %s failed inside the proxy", request_id)
            error = ProxyError(f"Internal error in ctxproxy: {type(exc).__name__}")
            await self._fail_early(send, error, row, started)
            return
        except asyncio.CancelledError:  # the server is shutting down: the row still completes
            row["overhead_ms"] = round((time.perf_counter() - started) * 1000, 3)
            await self.s.store.insert_request(row)
            gone = ShuttingDown()
            await self._finish(row, self._fields(row, started, gone.status, gone, None))
            raise

        await self.s.store.insert_request(row)
        out_headers = {
            "x-ctxproxy-request-id": request_id,
            "x-ctxproxy-overhead-ms": f"{overhead_ms:.3f}",
            "x-ctxproxy-session-id": header_value(rewritten.session_id),
        }
        key = upstream_api_key(upstream, headers, self.s.settings.auth.mode)
        async with DisconnectWatch(receive) as watch:
            try:
                response = await self.s.upstream.chat(upstream, rewritten.body, headers, key)
            except ProxyError as exc:
                await self._answer_error(send, exc, row, started, out_headers)
                return
            except asyncio.CancelledError:  # the client went away while we waited upstream
                row["client_disconnected"] = 1
                await self._finish(
                    row,
                    self._fields(
                        row, started, CLIENT_CLOSED, ClientGone("Client disconnected."), None
                    ),
                )
                if watch.ours():
                    return
                raise
            except Exception as exc:  # a bug of ours or a library's: still an OpenAI-shaped answer
                log.exception("request %s failed calling upstream %s", request_id, upstream.name)
                error = ProxyError(f"Internal error in ctxproxy: {type(exc).__name__}")
                await self._answer_error(send, error, row, started, out_headers)
                return
            if response.chunks is None:
                await self._answer(send, response, row, started, out_headers)
            else:
                await self._relay(send, response, row, started, out_headers, watch)

    async def _answer(
        self,
        send: Send,
        response: UpstreamResponse,
        row: dict[str, Any],
        started: float,
        out_headers: dict[str, str],
    ) -> None:
        """A whole (non-streaming) upstream answer: relay it, then complete the log row."""
        body = response.body or b""
        ttfb = (time.perf_counter() - started) * 1000
        try:
            raw_headers = _raw_headers({**response.headers, **out_headers}, len(body))
        except Exception as exc:  # e.g. a header that cannot be encoded: answer 500, finish
            await self._unsendable(send, exc, row, started)
            return
        try:
            fields = self._fields(row, started, response.status, None, ttfb, _usage_of(body), body)
        except Exception as exc:  # e.g. a captured answer that cannot be stored
            await self._unsendable(send, exc, row, started)
            return
        try:
            await send(
                {"type": "http.response.start", "status": response.status, "headers": raw_headers}
            )
            await send({"type": "http.response.body", "body": body})
        finally:
            await self._finish(row, fields)

    async def _relay(
        self,
        send: Send,
        response: UpstreamResponse,
        row: dict[str, Any],
        started: float,
        out_headers: dict[str, str],
        watch: DisconnectWatch,
    ) -> None:
        """Relay upstream bytes as they come; complete the log row however the stream ends."""
        assert response.chunks is not None
        tap = UsageTap()
        ttfb: float | None = None
        error: ProxyError | None = None
        complete = False
        status = response.status
        captured: list[bytes] | None = [] if self.s.settings.store.capture_payloads else None
        try:
            raw_headers = _raw_headers({**response.headers, **out_headers}, None)
        except Exception as exc:
            if response.close is not None:
                await response.close()
            await self._unsendable(send, exc, row, started)
            return
        try:
            await send({"type": "http.response.start", "status": status, "headers": raw_headers})
            try:
                async for chunk in response.chunks:
                    if ttfb is None:
                        ttfb = (time.perf_counter() - started) * 1000
                    tap.feed(chunk)
                    if captured is not None:
                        captured.append(chunk)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                complete = True
            except ProxyError as exc:  # upstream broke off: tell the client in the stream, end
                error = exc
                event = b"data: " + exc.body_bytes() + b"\n\n"
                await send({"type": "http.response.body", "body": event, "more_body": True})
            watch.stop()  # from here on, uvicorn reports the end of the response as a disconnect
            await send({"type": "http.response.body", "body": b""})
        except asyncio.CancelledError:
            if not watch.ours():
                raise
        except BaseException as exc:  # the response could not be sent (e.g. the server refused)
            if ttfb is None and not complete and error is None:
                log.error("request %s: the response could not be sent: %r", row["id"], exc)
                error = ProxyError(f"Internal error in ctxproxy: {type(exc).__name__}")
                status = error.status
            raise
        finally:
            if response.close is not None:
                await response.close()
            if not complete and error is None:
                row["client_disconnected"] = 1
            body = b"".join(captured) if captured is not None else None
            await self._finish(
                row, self._fields(row, started, status, error, ttfb, tap.usage, body)
            )

    async def _unsendable(
        self, send: Send, exc: Exception, row: dict[str, Any], started: float
    ) -> None:
        log.error("request %s failed building the response: %r", row["id"], exc)
        error = ProxyError(f"Internal error in ctxproxy: {type(exc).__name__}")
        await self._answer_error(send, error, row, started, {"x-ctxproxy-request-id": row["id"]})

    async def _answer_error(
        self,
        send: Send,
        error: ProxyError,
        row: dict[str, Any],
        started: float,
        headers: dict[str, str],
    ) -> None:
        """Answer ``error`` in OpenAI's shape; the row completes even if sending fails."""
        fields = self._fields(row, started, error.status, error, None)
        try:
            await _send_json(send, error.status, error.body_bytes(), headers)
        finally:
            await self._finish(row, fields)

    async def _read_body(self, receive: Receive, headers: dict[str, str]) -> bytes:
        limits = self.s.settings.limits
        limit = limits.max_body_bytes
        declared = headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(f"Request body is {declared} bytes; the limit is {limit} bytes.")
        chunks, size = [], 0
        try:
            async with asyncio.timeout(limits.body_read_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise ClientGone("Client disconnected.")
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        raise PayloadTooLarge(f"Request body exceeds the limit of {limit} bytes.")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        except TimeoutError:
            raise RequestTimeout(
                f"The request body was not received within {limits.body_read_timeout_s:g} s "
                f"({size} bytes arrived).",
                code="request_timeout",
            ) from None

    async def _fail_early(
        self, send: Send, exc: ProxyError, row: dict[str, Any], started: float
    ) -> None:
        overhead_ms = (time.perf_counter() - started) * 1000
        row["overhead_ms"] = round(overhead_ms, 3)
        await self.s.store.insert_request(row)
        fields = self._fields(row, started, exc.status, exc, None)
        headers = {
            "x-ctxproxy-request-id": row["id"],
            "x-ctxproxy-overhead-ms": f"{overhead_ms:.3f}",
        }
        if isinstance(exc, (RequestTimeout, PayloadTooLarge)):
            # the body was not read to its end: this connection cannot carry another request
            # (and a trickling sender must not keep it)
            headers["connection"] = "close"
        try:
            if not isinstance(exc, ClientGone):  # nobody is left to answer
                await _send_json(send, exc.status, exc.body_bytes(), headers)
        finally:
            await self._finish(row, fields)

    def _fields(
        self,
        row: dict[str, Any],
        started: float,
        status: int,
        error: ProxyError | None,
        ttfb: float | None,
        usage: dict[str, Any] | None = None,
        response_body: bytes | None = None,
    ) -> dict[str, Any]:
        """What completes the log row, taken when the answer is ready (before it is sent)."""
        fields: dict[str, Any] = {
            "status": status,
            "latency_ms": round((time.perf_counter() - started) * 1000, 3),
            "ttfb_ms": round(ttfb, 3) if ttfb is not None else None,
            "client_disconnected": row.get("client_disconnected", 0),
            **usage_fields(usage),
        }
        if error is not None:
            fields["error_type"] = error.code
            fields["error"] = redact_text(error.message)
        elif status >= 400 and response_body:  # an upstream's error may echo the key it got
            fields["error_type"] = "upstream_status"
            fields["error"] = redact_text(response_body[:2000].decode("utf-8", "replace"))
        if response_body is not None and self.s.settings.store.capture_payloads:
            fields["response_body"] = _redacted_text(response_body)
        return fields

    async def _finish(self, row: dict[str, Any], fields: dict[str, Any]) -> None:
        await self.s.store.finish_request(row["id"], fields)
        row.update(fields)
        self.s.observers.finished(row)


class DisconnectWatch:
    """Watches ``receive`` for the client going away while we wait upstream or relay a stream,
    and cancels the request's task then: the upstream call is abandoned (its connection closed,
    so a generating upstream stops) instead of running on for nobody."""

    def __init__(self, receive: Receive) -> None:
        self.receive = receive
        self.fired = False
        self._task: asyncio.Task[None] | None = None
        self._owner: asyncio.Task[Any] | None = None

    async def __aenter__(self) -> DisconnectWatch:
        self._owner = asyncio.current_task()
        self._task = asyncio.get_running_loop().create_task(self._watch())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        self.stop()
        if self.fired and self._owner is not None:
            self.fired = False
            # the cancel was ours, handled here; one from outside as well (server shutdown, an
            # enclosing timeout) still stands and goes on up
            remaining = self._owner.uncancel()
            return kind is asyncio.CancelledError and remaining == 0
        return False

    def ours(self) -> bool:
        """Whether a CancelledError being handled is only the watch's own."""
        owner = self._owner
        return self.fired and owner is not None and owner.cancelling() <= 1

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _watch(self) -> None:
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                break
        self.fired = True
        self._task = None
        if self._owner is not None:
            self._owner.cancel()


def header_value(text: str) -> str:
    """A client-chosen id as a header value: printable ASCII kept, anything else (non-latin-1
    characters, control characters, spaces) and ``%`` itself percent-encoded (UTF-8)."""
    return quote(text, safe=_HEADER_SAFE)


_HEADER_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


def _raw_headers(headers: dict[str, str], length: int | None) -> list[tuple[bytes, bytes]]:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    # (relay_headers already left out upstream values that cannot be sent)
    if length is not None:
        raw.append((b"content-length", str(length).encode()))
    return raw


async def _send_json(send: Send, status: int, body: bytes, headers: dict[str, str]) -> None:
    raw = _raw_headers({**headers, "content-type": "application/json"}, len(body))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _usage_of(body: bytes | None) -> dict[str, Any] | None:
    if not body:
        return None
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    usage = obj.get("usage") if isinstance(obj, dict) else None
    return usage if isinstance(usage, dict) else None


def _redacted_text(body: bytes) -> str:
    try:
        return orjson.dumps(redact(orjson.loads(body))).decode()
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, RecursionError):
        # not JSON, or JSON nested too deep to write back: stored as redacted text
        return str(redact(body.decode("utf-8", "replace")))
