"""The model endpoints (``POST /v1/chat/completions``, ``/v1/messages``, ``/v1/responses``):
authenticate, parse, rewrite, log, forward, relay; one handler, the protocol's ``Wire`` saying
how to read its body, call its upstream and shape its errors.

The log row is queued before the upstream call and completed in ``finally`` (status, latency, time
to first byte, usage), also when the client goes away mid-stream."""

from __future__ import annotations

import asyncio
import logging
import time
from functools import partial
from typing import Any

from starlette.types import Receive, Scope, Send

from proxy.attribution.ledger import Pending
from proxy.errors import (
    BODY_UNREAD,
    CLIENT_CLOSED,
    ClientGone,
    InternalError,
    ModelNotFound,
    ProxyError,
    ShuttingDown,
    TooManyInFlight,
    require_json,
)
from proxy.failures import STOPPING
from proxy.rewrite.offload import enter_lane, watch_client
from proxy.rewrite.prepared import Prepared
from proxy.rewrite.session_key import header_session
from proxy.server.asgi_send import (
    header_dict,
    header_value,
    raw_headers,
    read_body,
    route_path,
    send_json,
)
from proxy.server.asgi_send import request_id as new_request_id
from proxy.server.body_work import captured, read_body_json
from proxy.server.disconnect_watch import DisconnectWatch, disconnect_signal
from proxy.server.feedback import ask_diagnosis, note_cache_usage, whole_answer, with_cache_line
from proxy.server.forward_first import finished, let_go, refused
from proxy.server.in_flight import Ticket, declared_length
from proxy.server.log_fields import completion_fields, with_captured_answer
from proxy.server.provider_refs import (
    AnswerReader,
    answer_reader,
    kept_ids_for,
    require_own,
    what_was_read,
)
from proxy.server.rescue import rescue_overflow
from proxy.server.response_ids import continued_session, response_ids_for
from proxy.server.services import Services
from proxy.server.stream_deadline import answer_bound
from proxy.server.stream_relay import relay_stream
from proxy.server.wire import Call, Wire
from proxy.upstream import UpstreamResponse
from proxy.upstream.usage import cache_usage, usage_of
from rules.memo_scope import enter_scope
from rules.redact import redact_text
from rules.report import bounded_report

log = logging.getLogger("ctxproxy.handler")


class ProtocolHandler:
    """A raw ASGI app (the hot path skips Starlette's routing and middleware, ~0.15 ms a request).
    Log rows are completed after the response is sent, so the client never waits on the log."""

    def __init__(self, services: Services, wire: Wire) -> None:
        self.s = services
        self.wire = wire
        # each session's last body: the next one read where it differs; the body limits held
        self.bodies = wire.memory(services.settings.limits)
        # the Responses API's: a previous_response_id must be one relayed to the same principal
        ids = response_ids_for(services.settings, services.store) if wire.response_ids else None
        self.response_ids = ids
        # containers relayed to each principal (beside its response ids): for it alone
        self.kept_ids = kept_ids_for(wire.adapter.name, ids, services)
        # what completes a log row (``log_fields``), answers captured as configured
        self._fields = partial(completion_fields, capture=services.settings.store.capture_payloads)
        self._open: set[str] = set()  # the requests the observers heard start and not finish

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One request; the observers hear it started and finished once each, however it ends
        (the in-flight gauge comes down in ``finally``)."""
        row: dict[str, Any] = {"id": new_request_id()}
        self.s.observers.started()
        self._open.add(row["id"])
        held: list[Prepared] = []  # the rewrite whose session is held until it is finished
        counted: list[Ticket] = []  # once this request counts among its principal's in flight
        try:
            await self._serve(scope, receive, send, row, held, counted)
        finally:
            if counted:
                self.s.in_flight.leave(counted[0])
            if held:  # finished where the upstream call started, unless it never did
                await let_go(held[0], row["id"])
            self._close(row)  # nothing left to do unless the row was never finished

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        row: dict[str, Any],
        held: list[Prepared],
        counted: list[Ticket],
    ) -> None:
        started = time.perf_counter()
        request_id = row["id"]
        headers = header_dict(scope["headers"])
        wire = self.wire
        path = route_path(scope)
        query = scope.get("query_string", b"").decode("latin-1")
        row.update(
            created_at=time.time(),
            path=scope["path"],
            protocol=wire.adapter.name,
            principal="-",  # not known yet: a request refused before it names nobody
        )
        try:
            principal = wire.principal(self.s.principals, headers, query)
            row["principal"] = principal
            # its turn in what tenants share (an unverified key: its network's, with the others)
            lane = self.s.principals.lane(principal, client := scope.get("client"))
            enter_lane(lane)
            # 429 past the lane's bounds, for a declared length before the body is read
            counted.append(ticket := self.s.in_flight.enter(lane))
            self.s.in_flight.size(ticket, declared_length(headers, self.s.settings.limits))
            enter_scope(principal)  # the memos' entries this request may hit: its principal's
            signal = disconnect_signal(scope)  # its work in a worker stops once the client went
            watch_client(None if signal is None else partial(getattr, signal, "lost"))
            # 415 before reading: a non-JSON POST is what a web page can send cross-site without
            # a CORS preflight; its body is left unread (the answer closes the connection)
            require_json(headers.get("content-type"))
            grow = self.s.in_flight.grower(ticket)
            raw = await read_body(receive, headers, self.s.settings.limits, grow)
            self.s.in_flight.size(ticket, len(raw))  # as read (decoded)
            offload = self.s.engine.offload  # a heavy body is read off the event loop
            hint = header_session(headers)
            # (mended where a lone surrogate broke it, which the provider would refuse too)
            body, fresh, raw = await read_body_json(self.bodies, offload, raw, hint, principal)
            # the row feeds the log, /metrics and stderr: a key pasted as the model stays out
            named = None if wire.target is None else wire.target(path)
            model, streamed = named or (body["model"], bool(body.get("stream")))
            row.update(model=redact_text(model), stream=int(streamed))
            upstream = self.s.settings.upstream_for(model)
            if upstream is None:
                raise ModelNotFound(
                    f"The model '{model}' is not served by any configured upstream.",
                    param="model",
                )
            # refused before the rules see (and keep) it; a continuation is in its chain's session
            continued = await continued_session(self.response_ids, principal, headers, body)
            await require_own(self.kept_ids, principal, wire.adapter.name, body, upstream, raw,
                              items=self.response_ids is not None)  # fmt: skip
            prepared = await self.s.engine.prepare(
                body,
                headers,
                now=row["created_at"],
                raw_size=len(raw),
                adapter=wire.adapter,
                principal=principal,
                fresh=fresh,
                model=None if named is None else model,
                session_id=continued,
            )
            held.append(prepared)
            rewritten = prepared.rewritten
            report = rewritten.report
            overhead_ms = (time.perf_counter() - started) * 1000
            row.update(
                session_id=rewritten.session_id,
                parent_session_id=rewritten.parent_session_id,
                upstream=upstream.name,
                tokens_before=report["tokens"]["before"],
                tokens_after=report["tokens"]["after"],
                sections=report.get("sections"),
                report=bounded_report(report),
                overhead_ms=round(overhead_ms, 3),
            )
            # the provider asked why a miss happened: the request's facts are needed to ask
            diagnosed = upstream.cache_diagnostics
            if self.s.settings.store.capture_payloads or diagnosed:
                rewritten = await prepared.finish()
            if self.s.settings.store.capture_payloads:
                row.update(await captured(offload, len(raw), body, rewritten.body))
        except ClientGone as exc:  # the client went away while sending its body
            row["client_disconnected"] = 1
            await self._fail_early(send, exc, row, started)
            return
        except ProxyError as exc:
            await self._fail_early(send, exc, row, started)
            return
        except asyncio.CancelledError:  # the server is shutting down: the row still completes
            row["overhead_ms"] = round((time.perf_counter() - started) * 1000, 3)
            await self.s.store.insert_request(row)
            gone = ShuttingDown()
            await self._finish(row, self._fields(row, started, gone.status, gone, None))
            raise
        except STOPPING:
            raise
        except BaseException as exc:  # a bug of ours or a native panic: the protocol's shape, a log
            log.exception("request %s failed inside the proxy", request_id)
            error = InternalError(exc)
            await self._fail_early(send, error, row, started)
            return

        await self.s.store.insert_request(row)
        out_headers = {
            "x-ctxproxy-request-id": request_id,
            "x-ctxproxy-overhead-ms": f"{overhead_ms:.3f}",
            "x-ctxproxy-session-id": header_value(rewritten.client_session),
        }
        # with the upstream's cache_diagnostics: the provider asked why a miss happened
        pending, forwarded, upstream_headers = ask_diagnosis(
            self.s.engine.ledger, rewritten.cache, upstream, wire.adapter.name, rewritten.body,
            headers,
        )  # fmt: skip
        call = Call(self.s, upstream, upstream_headers, query, path, model, principal)
        forwarded = call.sent(forwarded)
        async with DisconnectWatch(receive, disconnect_signal(scope)) as watch:
            try:
                # the client's own bytes, or the rewrite's where the adapter had them; with the
                # server's key, the body as read (``what_was_read``)
                payload = raw if rewritten.body is body else rewritten.data
                if forwarded is not rewritten.body or what_was_read(upstream):
                    payload = None  # written anew (and with the diagnosis asked for)
                finishing = not prepared.finished
                if finishing:  # finished while the upstream reads the request
                    prepared.finish_soon()
                async with answer_bound(self.s.settings.limits.stream_max_s):
                    response = await wire.forward(call, forwarded, payload)
                if finishing:
                    try:
                        rewritten = await finished(prepared, request_id)
                    except BaseException:  # cancelled meanwhile: the answer is nobody's
                        if response.close is not None:
                            await asyncio.shield(response.close())
                        raise
                    pending = rewritten.cache
                # a "prompt too long" answer: compacted to the stated window, retried once
                first = rewritten
                response, rewritten = await rescue_overflow(
                    self.s, wire, call, rewritten, response, row, len(raw), body
                )
                if rewritten is not first:
                    pending = rewritten.cache
                if response.status >= 400:  # refused: its state left as it was
                    await refused(self.s.engine, prepared, request_id, rewritten)
                # a lane of its own from now, once an answer vouches for its own credential
                self.s.principals.answered(principal, response.status, upstream, client)
            except ProxyError as exc:
                await refused(self.s.engine, prepared, request_id)
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
            except STOPPING:
                raise
            except BaseException as exc:  # a bug of ours or a library's: an answer in its shape
                log.exception("request %s failed calling upstream %s", request_id, upstream.name)
                error = InternalError(exc)
                await self._answer_error(send, error, row, started, out_headers)
                return
            if "breakpoints" in response.extra:  # cache marks the litellm path placed
                # written with the row's completion (``_fields``), not in a write of its own
                row["report"] = {**row["report"], "breakpoints": response.extra["breakpoints"]}
            ids = answer_reader(self.response_ids, self.kept_ids, principal, wire.adapter.name,
                                rewritten.body, response.status, upstream,
                                rewritten.client_session)  # fmt: skip
            if response.chunks is None:
                await self._answer(send, response, row, started, out_headers, ids, pending)
            else:
                await relay_stream(
                    self, send, response, row, started, out_headers, watch, ids, pending
                )

    async def _answer(
        self,
        send: Send,
        response: UpstreamResponse,
        row: dict[str, Any],
        started: float,
        out_headers: dict[str, str],
        ids: AnswerReader | None = None,
        pending: Pending | None = None,
    ) -> None:
        """A whole (non-streaming) upstream answer: relay it, then read its usage (the cache's
        feedback) and complete the log row, off the client's path; the row's times are taken
        when the answer was ready. Its response id (``ids``) is noted before it is sent."""
        body = response.body or b""
        if ids is not None:
            ids.answer(body)
        ready = time.perf_counter()
        ttfb = (ready - started) * 1000
        try:
            head = raw_headers({**response.headers, **out_headers}, len(body))
        except Exception as exc:  # e.g. a header that cannot be encoded: answer 500, finish
            await self._unsendable(send, exc, row, started)
            return
        fields = None
        if self.s.settings.store.capture_payloads:
            # redacted before it is sent (off the event loop when large), so that the row is
            # complete once the client has the answer (a failure there leaves the copy out)
            try:
                fields = self._fields(
                    row, started, response.status, None, ttfb, usage_of(body), body, ready
                )
                fields = await with_captured_answer(self.s.engine.offload, fields)
            except Exception as exc:
                await self._unsendable(send, exc, row, started)
                return
        try:
            await send({"type": "http.response.start", "status": response.status, "headers": head})
            await send({"type": "http.response.body", "body": body})
        finally:
            usage = usage_of(body) if fields is None else fields.get("usage")
            reported = cache_usage(usage)  # read once: the feedback, the row, the cache line
            note_cache_usage(self.s.store, row, response.status, reported)
            if fields is None:
                try:
                    fields = self._fields(
                        row, started, response.status, None, ttfb, usage, body, ready,
                        reported=reported,
                    )  # fmt: skip
                except Exception:  # a bug of ours: the row is still completed, without usage
                    log.exception("completing the log row of %s failed", row.get("id"))
                    fields = {"status": response.status, "ttfb_ms": round(ttfb, 3)}
            answer = whole_answer(body) if pending is not None and pending.diagnose else None
            fields = with_cache_line(
                fields, self.s.engine.ledger, pending, row, response.status, reported, answer
            )
            await self._finish(row, fields)

    async def _unsendable(
        self, send: Send, exc: Exception, row: dict[str, Any], started: float
    ) -> None:
        log.error("request %s failed building the response: %r", row["id"], exc)
        error = InternalError(exc)
        await self._answer_error(send, error, row, started, {"x-ctxproxy-request-id": row["id"]})

    async def _answer_error(
        self,
        send: Send,
        error: ProxyError,
        row: dict[str, Any],
        started: float,
        headers: dict[str, str],
    ) -> None:
        """The one error answer, in the protocol's shape. The row completes even if sending fails;
        nothing is sent to a client that left; a body left unread closes the connection."""
        fields = self._fields(row, started, error.status, error, None)
        if isinstance(error, BODY_UNREAD):  # the connection carries no other request
            headers = {**headers, "connection": "close"}
        try:
            if not isinstance(error, ClientGone):
                await send_json(send, error.status, self.wire.error_body(error), headers)
        finally:
            await self._finish(row, fields)

    async def _fail_early(
        self, send: Send, error: ProxyError, row: dict[str, Any], started: float
    ) -> None:
        """An error before forwarding: the row, not queued yet, is queued now, then answered."""
        overhead_ms = (time.perf_counter() - started) * 1000
        row["overhead_ms"] = round(overhead_ms, 3)
        await self.s.store.insert_request(row)
        headers = {
            "x-ctxproxy-request-id": row["id"],
            "x-ctxproxy-overhead-ms": f"{overhead_ms:.3f}",
        }
        if isinstance(error, TooManyInFlight):
            headers["retry-after"] = str(error.retry_after_s)
        await self._answer_error(send, error, row, started, headers)

    async def _finish(self, row: dict[str, Any], fields: dict[str, Any]) -> None:
        fields = await with_captured_answer(self.s.engine.offload, fields)
        await self.s.store.finish_request(row["id"], fields)
        row.update(fields)
        self._close(row)

    def _close(self, row: dict[str, Any]) -> None:
        """The observers hear the request finished: once, the first time."""
        if row["id"] in self._open:
            self._open.discard(row["id"])
            self.s.observers.finished(row)
