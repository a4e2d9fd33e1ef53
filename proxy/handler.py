"""POST /v1/chat/completions: authenticate, parse, rewrite, log, forward, relay.

The log row is queued before the upstream call and completed in ``finally`` (status, latency, time
to first byte, usage), also when the client goes away mid-stream."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse

from proxy.auth import check_client
from proxy.engine import Engine, parse_body
from proxy.errors import ModelNotFound, PayloadTooLarge, ProxyError
from proxy.observe import Observers
from proxy.redact import redact, redact_text
from proxy.settings import Settings
from proxy.sse_usage import UsageTap
from proxy.store import Store
from proxy.upstream import UpstreamClient, UpstreamResponse, upstream_api_key

log = logging.getLogger("ctxproxy.handler")
CLIENT_CLOSED = 499  # nginx's status for "client closed the request", as logged, never sent


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
        "prompt_tokens": usage.get("prompt_tokens"),
        "completion_tokens": usage.get("completion_tokens"),
        "cached_tokens": cached,
    }


class ChatCompletions:
    def __init__(self, services: Services) -> None:
        self.s = services

    async def __call__(self, request: Request) -> Response:
        started = time.perf_counter()
        request_id = "req_" + uuid.uuid4().hex[:24]
        headers = {k.lower(): v for k, v in request.headers.items()}
        row: dict[str, Any] = {
            "id": request_id,
            "created_at": time.time(),
            "path": request.url.path,
        }
        self.s.observers.started()
        try:
            check_client(self.s.settings.auth, headers)
            raw = await self._read_body(request)
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
        except ProxyError as exc:
            return await self._fail_early(exc, row, started)
        except ClientDisconnect:  # the client went away while sending its body
            row["client_disconnected"] = 1
            return await self._fail_early(ClientGone("Client disconnected."), row, started)
        except Exception as exc:  # a bug of ours: answer in OpenAI's shape, keep the traceback
            log.exception("request %s failed inside the proxy", request_id)
            error = ProxyError(f"Internal error in ctxproxy: {type(exc).__name__}")
            return await self._fail_early(error, row, started)

        await self.s.store.insert_request(row)
        out_headers = {
            "x-ctxproxy-request-id": request_id,
            "x-ctxproxy-overhead-ms": f"{overhead_ms:.3f}",
            "x-ctxproxy-session-id": header_value(rewritten.session_id),
        }
        key = upstream_api_key(upstream, headers, self.s.settings.auth.mode)
        try:
            response = await self.s.upstream.chat(upstream, rewritten.body, headers, key)
        except ProxyError as exc:
            await self._finish(row, started, status=exc.status, error=exc, ttfb=None)
            return Response(exc.body_bytes(), exc.status, out_headers, "application/json")
        except asyncio.CancelledError:  # the client went away while we waited upstream
            row["client_disconnected"] = 1
            await self._finish(row, started, CLIENT_CLOSED, None, None)
            raise
        except Exception as exc:  # a bug of ours or a library's: still an OpenAI-shaped answer
            log.exception("request %s failed calling upstream %s", request_id, upstream.name)
            error = ProxyError(f"Internal error in ctxproxy: {type(exc).__name__}")
            await self._finish(row, started, status=error.status, error=error, ttfb=None)
            return Response(error.body_bytes(), error.status, out_headers, "application/json")
        try:
            if response.chunks is None:
                ttfb = (time.perf_counter() - started) * 1000
                answer: Response = Response(
                    response.body, response.status, {**response.headers, **out_headers}
                )
                usage = _usage_of(response.body)
                await self._finish(row, started, response.status, None, ttfb, usage, response.body)
                return answer
            relay = _Relay(self, response, row, started)
            return _RelayResponse(
                relay, status_code=response.status, headers={**response.headers, **out_headers}
            )
        except Exception as exc:  # e.g. a header that cannot be encoded: answer, close, finish
            log.exception("request %s failed building the response", request_id)
            error = ProxyError(f"Internal error in ctxproxy: {type(exc).__name__}")
            if response.close is not None:
                await response.close()
            await self._finish(row, started, status=error.status, error=error, ttfb=None)
            headers = {"x-ctxproxy-request-id": request_id}
            return Response(error.body_bytes(), error.status, headers, "application/json")

    async def _read_body(self, request: Request) -> bytes:
        limit = self.s.settings.limits.max_body_bytes
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(f"Request body is {declared} bytes; the limit is {limit} bytes.")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"Request body exceeds the limit of {limit} bytes.")
            chunks.append(chunk)
        return b"".join(chunks)

    async def _fail_early(self, exc: ProxyError, row: dict[str, Any], started: float) -> Response:
        overhead_ms = (time.perf_counter() - started) * 1000
        row["overhead_ms"] = round(overhead_ms, 3)
        await self.s.store.insert_request(row)
        await self._finish(row, started, exc.status, exc, None)
        headers = {
            "x-ctxproxy-request-id": row["id"],
            "x-ctxproxy-overhead-ms": f"{overhead_ms:.3f}",
        }
        return Response(exc.body_bytes(), exc.status, headers, "application/json")

    async def _finish(
        self,
        row: dict[str, Any],
        started: float,
        status: int,
        error: ProxyError | None,
        ttfb: float | None,
        usage: dict[str, Any] | None = None,
        response_body: bytes | None = None,
    ) -> None:
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
        await self.s.store.finish_request(row["id"], fields)
        row.update(fields)
        self.s.observers.finished(row)


def header_value(text: str) -> str:
    """A client-chosen id as a header value: printable ASCII kept, anything else (non-latin-1
    characters, control characters, spaces) and ``%`` itself percent-encoded (UTF-8)."""
    return quote(text, safe=_HEADER_SAFE)


_HEADER_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


class _Relay:
    """Relays upstream bytes as they come and completes the log row however the stream ends,
    also when the response start could not be sent and the relay never ran."""

    def __init__(
        self,
        handler: ChatCompletions,
        response: UpstreamResponse,
        row: dict[str, Any],
        started: float,
    ) -> None:
        self.handler = handler
        self.response = response
        self.row = row
        self.started = started
        self.finished = False
        self.chunks = self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        response, row, started = self.response, self.row, self.started
        assert response.chunks is not None
        tap = UsageTap()
        ttfb: float | None = None
        error: ProxyError | None = None
        complete = False
        capture = self.handler.s.settings.store.capture_payloads
        captured: list[bytes] | None = [] if capture else None
        try:
            async for chunk in response.chunks:
                if ttfb is None:
                    ttfb = (time.perf_counter() - started) * 1000
                tap.feed(chunk)
                if captured is not None:
                    captured.append(chunk)
                yield chunk
            complete = True
        except ProxyError as exc:  # upstream broke off: tell the client in the stream, then end
            error = exc
            yield b"data: " + exc.body_bytes() + b"\n\n"
        finally:
            self.finished = True
            if response.close is not None:
                await response.close()
            if not complete and error is None:
                row["client_disconnected"] = 1
            body = b"".join(captured) if captured is not None else None
            await self.handler._finish(row, started, response.status, error, ttfb, tap.usage, body)

    async def settle(self, exc: BaseException | None) -> None:
        """After the response was sent or failed: run the relay's cleanup if it did not run."""
        if self.finished:
            return
        await self.chunks.aclose()  # a relay suspended mid-stream runs its ``finally`` now
        if self.finished:
            return
        self.finished = True  # never started: the response start itself failed
        if self.response.close is not None:
            await self.response.close()
        if isinstance(exc, asyncio.CancelledError):
            self.row["client_disconnected"] = 1
            await self.handler._finish(self.row, self.started, CLIENT_CLOSED, None, None)
            return
        log.error("request %s: the response could not be sent: %r", self.row["id"], exc)
        name = type(exc).__name__ if exc is not None else "response not sent"
        error = ProxyError(f"Internal error in ctxproxy: {name}")
        await self.handler._finish(self.row, self.started, error.status, error, None)


class _RelayResponse(StreamingResponse):
    def __init__(self, relay: _Relay, status_code: int, headers: dict[str, str]) -> None:
        super().__init__(relay.chunks, status_code=status_code, headers=headers)
        self.relay = relay

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        failure: BaseException | None = None
        try:
            await super().__call__(scope, receive, send)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            await self.relay.settle(failure)


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
    except orjson.JSONDecodeError:
        return str(redact(body.decode("utf-8", "replace")))
