"""OpenAI's endpoints that are not a conversation, ``POST /v1/embeddings`` and
``POST /v1/moderations`` (and without ``/v1``): relayed to the catch-all ``kind: openai``
upstream, the one ``GET /v1/models`` lists, so a client whose ``OPENAI_BASE_URL`` is the proxy
keeps its embeddings. Nothing in the request chooses where it goes (its ``model`` is the
upstream's to read; the query string is not sent), and no rule reads or changes the body.

The key rules are the chat relay's (``wire.Call.key``): config's key with ``api_key_env``, else
in passthrough the client's own, never to another provider's own API. Beside the server's key the
body's end-user id (``user``) goes scoped to the principal (``tenant_ids``) and the account
headers are dropped; otherwise the bytes go as the client sent them. The body limits, each
principal's in-flight bounds and ``limits.stream_max_s`` hold as for a model request, and the
body must be a JSON object (a 400 in OpenAI's shape, nothing sent, as for a model request); a
success answer streams through and an error answer comes back redacted. With no such upstream
the answer is a 404 in OpenAI's shape saying so, nothing sent. Each request has its log row
(``relay_log``): the request log, the JSON log line and ``/metrics`` count it with its usage."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import orjson
from starlette.types import Receive, Scope, Send

from proxy.errors import ProxyError, require_json
from proxy.protocols.body import parse_json
from proxy.protocols.body_limits import check_containers
from proxy.protocols.errors import reshaped_as_openai
from proxy.rewrite.offload import enter_lane
from proxy.server.asgi_send import header_dict, raw_headers, read_body
from proxy.server.disconnect_watch import gone_on_disconnect
from proxy.server.in_flight import Ticket, declared_length
from proxy.server.relay_log import RelayLog, UsageTail, answered_logged
from proxy.server.stream_deadline import answer_bound, bounded
from proxy.server.wire import Call
from proxy.settings import LimitSettings, UpstreamSettings
from proxy.upstream import UpstreamResponse
from proxy.upstream.usage import usage_of

if TYPE_CHECKING:
    from proxy.server.services import Services

log = logging.getLogger("ctxproxy.openai_relay")

# the path as routed -> the path under the upstream's base URL (which ends in ``/v1``)
RELAYED_PATHS = {
    "/v1/embeddings": "/embeddings",
    "/embeddings": "/embeddings",
    "/v1/moderations": "/moderations",
    "/moderations": "/moderations",
}


class NoRelayUpstream(ProxyError):
    status = 404
    error_type = "invalid_request_error"
    code = "no_upstream"


def relay_upstream(services: Services) -> UpstreamSettings | None:
    """The first ``kind: openai`` upstream that serves every model name (``match: ["*"]``): the
    one ``GET /v1/models`` asks."""
    return next(
        (u for u in services.settings.upstreams if u.kind == "openai" and u.serves("\x00any")), None
    )


async def relay(services: Services, path: str, scope: Scope, receive: Receive, send: Send) -> None:
    """``POST {path}`` (one of ``RELAYED_PATHS``) relayed; every error in OpenAI's shape. The
    request has its log row and is heard by the observers as a model request is."""
    headers = header_dict(scope["headers"])
    logged = RelayLog(services, scope["path"], RELAYED_PATHS[path].strip("/"))
    ticket: Ticket | None = None
    async with answered_logged(logged, send, _openai_body, f"relaying {path}"):
        try:
            principal = services.principals.of(headers)
            logged.row["principal"] = principal
            upstream = relay_upstream(services)
            if upstream is None:
                raise NoRelayUpstream(
                    f"POST {path} is relayed only to a `kind: openai` upstream that serves every "
                    "model (match: ['*']), and none is configured."
                )
            limits = services.settings.limits
            lane = services.principals.lane(principal, scope.get("client"))
            ticket = services.in_flight.enter(lane)
            services.in_flight.size(ticket, declared_length(headers, limits))
            require_json(headers.get("content-type"))
            raw = await read_body(receive, headers, limits, services.in_flight.grower(ticket))
            services.in_flight.size(ticket, len(raw))
            enter_lane(lane)  # a heavy body's parse takes its principal's turn of the workers
            offload = services.engine.offload
            body = await offload.maybe(offload.heavy(len(raw)), _parsed, raw, limits)
            logged.named(body.get("model"))
            call = Call(services, upstream, headers, "", principal=principal)
            key = call.key()
            if upstream.api_key_env:  # every tenant is one account: its end-user id scoped
                # the body as read, written anew: never the bytes as sent (a member given twice,
                # ``"user":"victim","user":null``, reads as its last; a gateway keeping the first
                # would act on a value no check saw)
                raw = orjson.dumps(call.sent(body))
            sent = services.upstream.openai_headers(upstream, headers, key)
            await logged.forwarding(upstream.name)
            # a success answer streams through (an embeddings batch's can be tens of MB; no rule
            # reads it): held a piece at a time, never whole
            content: bytes | None = None
            async with gone_on_disconnect(receive, scope):
                # a dripping upstream trips no per-read timeout: the wait for the head and the
                # answer are bounded as a model answer's are
                began = time.monotonic()
                async with answer_bound(limits.stream_max_s):
                    response = await services.upstream.post(
                        upstream, RELAYED_PATHS[path], raw, sent, False, passthrough=True
                    )
                logged.answered()
                client = scope.get("client")
                services.principals.answered(principal, response.status, upstream, client)
                if response.chunks is not None:
                    # the whole answer within the bound, its head's wait counted
                    left = limits.stream_max_s and max(
                        limits.stream_max_s - (time.monotonic() - began), 0.001
                    )
                    usage, broke = await _relay_pieces(
                        send, response, path, logged.headers(), left
                    )
                else:
                    content = await _send_whole(send, response, logged.headers())
            if content is None:
                await logged.finish(response.status, broke, usage)
                return
            failed = response.status >= 400
            await logged.finish(
                response.status,
                usage=None if failed else usage_of(content),
                error_body=content if failed else None,
            )
        finally:
            if ticket is not None:
                services.in_flight.leave(ticket)


async def _send_whole(send: Send, response: UpstreamResponse, extra: dict[str, str]) -> bytes:
    """A whole answer sent (an error in OpenAI's shape: a gateway's HTML page or plain text is
    reshaped); what was sent."""
    content, relayed = response.body or b"", response.headers
    if response.status >= 400:
        shaped = reshaped_as_openai(response.status, content)
        if shaped is not content:
            content, relayed = shaped, {**relayed, "content-type": "application/json"}
    head = raw_headers({**relayed, **extra}, len(content))
    await send({"type": "http.response.start", "status": response.status, "headers": head})
    await send({"type": "http.response.body", "body": content})
    return content


def _parsed(raw: bytes, limits: LimitSettings) -> dict[str, Any]:
    check_containers(raw, limits.max_json_containers)
    return parse_json(raw)


async def _relay_pieces(
    send: Send, response: UpstreamResponse, path: str, extra: dict[str, str], limit_s: float
) -> tuple[dict[str, Any] | None, ProxyError | None]:
    """A success answer relayed as it comes (``extra``: headers of ours beside the upstream's):
    the usage its last 64 KiB report, or why it broke off. An upstream that breaks off after the
    head, or still sends after ``limit_s`` (``limits.stream_max_s``), leaves the answer cut (the
    connection closed, its chunked body unended: the client sees it fail)."""
    assert response.chunks is not None
    head = raw_headers({**response.headers, **extra}, None)
    tail = UsageTail()
    try:
        await send({"type": "http.response.start", "status": response.status, "headers": head})
        try:
            async for piece in bounded(response.chunks, limit_s):
                tail.add(piece)
                await send({"type": "http.response.body", "body": piece, "more_body": True})
        except ProxyError as exc:
            log.warning("the upstream's answer to %s broke off: %s", path, exc.message)
            return None, exc
        await send({"type": "http.response.body", "body": b""})
        return tail.usage(), None
    finally:
        if response.close is not None:
            await response.close()


def _openai_body(error: ProxyError) -> bytes:
    return error.body_bytes()
