"""Gemini's paths: ``POST /{v1beta|v1}/models/{model}:generateContent`` and
``:streamGenerateContent`` (the protocol handler, ``wire.GEMINI_WIRE``), ``:countTokens`` (passed
through to a ``gemini`` upstream, counted here for the others, as ``count_tokens`` does for
Anthropic) and ``GET /v1beta/models`` (the configured model names). Errors on these paths take
Gemini's shape (``{"error": {"code", "message", "status"}}``)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.errors import (
    BadRequest,
    ModelNotFound,
    require_json,
)
from proxy.protocols.body_limits import check_body
from proxy.protocols.errors import gemini_body, gemini_error
from proxy.protocols.gemini import GEMINI
from proxy.protocols.validate import GEMINI_WRAPPED, gemini_count_request, validate_gemini_count
from proxy.rewrite.offload import enter_lane, items_of
from proxy.rewrite.preview import forwarded_body
from proxy.server.asgi_send import header_dict, read_body, send_json
from proxy.server.body_work import mended_body
from proxy.server.count_media import gemini_media_correction
from proxy.server.disconnect_watch import gone_on_disconnect
from proxy.server.in_flight import Ticket, declared_length
from proxy.server.provider_refs import require_own, what_was_read
from proxy.server.relay_log import RelayLog, answered_logged, send_answer
from proxy.server.stream_deadline import answer_bound
from proxy.server.wire import GEMINI_WIRE, Call, gemini_target
from proxy.upstream.gemini import client_key
from proxy.upstream.gemini_route import METHODS, parse_route
from rules.memo_scope import enter_scope

if TYPE_CHECKING:
    from proxy.server.services import Services


def gemini_endpoint(path: str, method: str) -> tuple[str | None, Response | None]:
    """Which handler serves ``path`` (``gemini`` or ``gemini_count``), or the error answer for a
    Gemini path that cannot be served; (None, None) for a path that is not Gemini's."""
    route = parse_route(path)
    if route is None:
        return None, None
    if route.method not in METHODS:
        return None, _error(404, f"Unknown method {route.method[:40]!r} on a model.")
    if method != "POST":
        return None, _error(405, f"{method[:10]} is not allowed on {path[:80]}.", {"allow": "POST"})
    return ("gemini_count" if route.method == "countTokens" else "gemini"), None


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(gemini_error(status, message), status, headers, "application/json")


class GeminiCountTokens:
    """``:countTokens``: the count of what the proxy would forward for this body now."""

    def __init__(self, services: Services) -> None:
        self.s = services
        self.bodies = GEMINI_WIRE.memory(services.settings.limits, validate_gemini_count)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        logged = RelayLog(self.s, scope["path"], "count_tokens")
        async with answered_logged(logged, send, gemini_body, "countTokens"):
            await self._serve(scope, receive, send, logged)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, logged: RelayLog) -> None:
        headers = header_dict(scope["headers"])
        path = scope["path"]
        ticket: Ticket | None = None
        try:
            query = scope.get("query_string", b"").decode("latin-1")
            principal = self.s.principals.of(headers, client_key(headers, query))
            logged.row["principal"] = principal
            enter_scope(principal)  # the memos' entries this request may hit: its principal's
            lane = self.s.principals.lane(principal, scope.get("client"))
            enter_lane(lane)  # its turn of the workers
            # among its principal's requests in flight, as a generation's: 429 past the bounds
            ticket = self.s.in_flight.enter(lane)
            self.s.in_flight.size(ticket, declared_length(headers, self.s.settings.limits))
            require_json(headers.get("content-type"))
            model, _ = gemini_target(path)
            logged.named(model)
            grow = self.s.in_flight.grower(ticket)
            raw = await read_body(receive, headers, self.s.settings.limits, grow)
            self.s.in_flight.size(ticket, len(raw))
            offload = self.s.engine.offload
            # kept apart per principal: a shared slot told one tenant, by its timing, whether
            # another had sent a body that starts as its own
            heavy = offload.heavy(len(raw))
            try:
                outer = await offload.maybe(heavy, self.bodies.parse, raw, None, principal)
            except BadRequest as exc:  # a lone surrogate, which Google would refuse too
                raw = await mended_body(offload, raw, exc)
                outer = await offload.maybe(heavy, self.bodies.parse, raw, None, principal)
            body = gemini_count_request(outer)  # the wrapped request, read as a plain one
            if body is not outer:
                check_body(body, "contents", self.s.settings.limits.max_items)
            upstream = self.s.settings.upstream_for(model)
            if upstream is None:
                raise ModelNotFound(
                    f"The model '{model}' is not served by any configured upstream.", param="model"
                )
            forwarded = await forwarded_body(
                self.s.engine, body, headers, time.time(), principal, GEMINI, len(raw), model
            )
            if upstream.kind == "gemini":
                # a cachedContent counted with the server's key: another's size (provider_refs);
                # a wrapped request beside contents too (Google counts the wrapped one)
                await require_own(None, principal, "gemini", body, upstream, raw)
                inner = outer.get(GEMINI_WRAPPED)
                if body is outer and isinstance(inner, dict):
                    await require_own(None, principal, "gemini", inner, upstream, raw)
                query = scope.get("query_string", b"").decode("latin-1")
                call = Call(self.s, upstream, headers, query, path, model)
                if body is not outer:  # sent as the client wrote it: wrapped
                    forwarded = outer if forwarded is body else {**outer, GEMINI_WRAPPED: forwarded}
                    body = outer
                sent = (
                    raw
                    if forwarded is body and not what_was_read(upstream)
                    else orjson.dumps(forwarded)
                )
                await logged.forwarding(upstream.name)
                async with gone_on_disconnect(receive, scope):
                    # a dripped answer trips no per-read timeout: bounded as a model answer's
                    async with answer_bound(self.s.settings.limits.stream_max_s):
                        response = await GEMINI_WIRE.forward(call, forwarded, sent)
                    logged.answered()
                    content = response.body or b""
                    await send_answer(send, response.status, response.headers, content, logged)
                return
            heavy = offload.heavy(len(raw), items_of(body))
            count = await offload.maybe(heavy, self._count, forwarded, model)
            await send_json(send, 200, orjson.dumps({"totalTokens": count}), logged.headers())
            await logged.finish(200)
        finally:
            if ticket is not None:
                self.s.in_flight.leave(ticket)

    def _count(self, body: dict[str, Any], model: str) -> int:
        lowered = GEMINI.lower(body)
        counter = self.s.engine.counters.for_model(model)
        n = counter.count_messages(lowered.messages) + counter.count_tools(lowered.tools)
        # the inline images and PDFs by their size where it can be read, not a flat figure each
        return n + gemini_media_correction(body.get("contents"))
