"""``POST /v1/messages/count_tokens``: passed through to an Anthropic upstream; for a model another
kind of upstream serves, counted here (the conversation in the chat view, the system prompt and
the tools, with the model's tokenizer) and answered as Anthropic does: ``{"input_tokens": N}``.
Errors take Anthropic's shape. The count is of what the proxy would forward for this body now (the
rules run on the session's state as it stands, nothing saved: ``proxy.rewrite.preview``), since
that is what the provider bills.
The body limits hold as for ``/v1/messages``; a heavy body is parsed and counted in the worker
thread (``proxy.rewrite.offload``), never on the event loop."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import orjson
from starlette.types import Receive, Scope, Send

from proxy.errors import BadRequest, ModelNotFound, require_json
from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.body import parse_json
from proxy.protocols.body_limits import check_body, check_containers
from proxy.protocols.errors import anthropic_body, reshaped_as_anthropic
from proxy.protocols.validate import validate_count_tokens
from proxy.rewrite.offload import enter_lane, items_of
from proxy.rewrite.preview import forwarded_body
from proxy.server.asgi_send import header_dict, read_body, send_json
from proxy.server.body_work import mended_body
from proxy.server.count_media import media_correction
from proxy.server.disconnect_watch import gone_on_disconnect
from proxy.server.in_flight import Ticket, declared_length
from proxy.server.provider_refs import require_own, what_was_read
from proxy.server.relay_log import RelayLog, answered_logged, send_answer
from proxy.server.response_ids import ResponseIds
from proxy.server.stream_deadline import answer_bound
from proxy.server.wire import Call
from proxy.settings import LimitSettings
from rules.memo_scope import enter_scope
from rules.redact import redacted_prefix

if TYPE_CHECKING:
    from proxy.server.services import Services


class CountTokens:
    def __init__(self, services: Services, kept_ids: ResponseIds | None = None) -> None:
        self.s = services
        # the containers and files relayed to each principal (the Messages handler's): a count
        # with the server's key naming another's file would tell its size
        self.kept_ids = kept_ids

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        logged = RelayLog(self.s, scope["path"], "count_tokens")
        async with answered_logged(logged, send, anthropic_body, "count_tokens"):
            await self._serve(scope, receive, send, logged)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, logged: RelayLog) -> None:
        headers = header_dict(scope["headers"])
        ticket: Ticket | None = None
        try:
            principal = self.s.principals.of(headers, every=True)  # Messages: all headers go
            logged.row["principal"] = principal
            enter_scope(principal)  # the memos' entries this request may hit: its principal's
            lane = self.s.principals.lane(principal, scope.get("client"))
            enter_lane(lane)  # its turn of the workers
            limits = self.s.settings.limits
            # among its principal's requests in flight, as a message's: 429 past the bounds
            ticket = self.s.in_flight.enter(lane)
            self.s.in_flight.size(ticket, declared_length(headers, limits))
            require_json(headers.get("content-type"))
            raw = await read_body(receive, headers, limits, self.s.in_flight.grower(ticket))
            self.s.in_flight.size(ticket, len(raw))
            offload = self.s.engine.offload
            heavy = offload.heavy(len(raw))
            try:
                body = await offload.maybe(heavy, _parsed, raw, limits)
            except BadRequest as exc:  # a lone surrogate, which Anthropic would refuse too
                raw = await mended_body(offload, raw, exc)
                body = await offload.maybe(heavy, _parsed, raw, limits)
            logged.named(body["model"])
            upstream = self.s.settings.upstream_for(body["model"])
            if upstream is None:
                # redacted before the cut: the row keeps the error, and a key past the cut
                # would keep its beginning there, of no key's shape
                shown = redacted_prefix(body["model"], 100)
                raise ModelNotFound(
                    f"The model '{shown}' is not served by any configured upstream.",
                    param="model",
                )
            forwarded = await forwarded_body(
                self.s.engine, body, headers, time.time(), principal, ANTHROPIC, len(raw)
            )
            if upstream.kind == "anthropic":
                from proxy.upstream import anthropic

                await require_own(self.kept_ids, principal, "anthropic", body, upstream, raw)

                sent = (
                    raw
                    if forwarded is body and not what_was_read(upstream)
                    else orjson.dumps(forwarded)
                )

                query = scope.get("query_string", b"").decode()
                call = Call(self.s, upstream, headers, query, model=str(body["model"]))
                await logged.forwarding(upstream.name)
                async with gone_on_disconnect(receive, scope):
                    # a dripped answer trips no per-read timeout: bounded as a model answer's
                    async with answer_bound(limits.stream_max_s):
                        response = await anthropic.messages(
                            self.s.upstream, upstream, sent, headers, call.query,
                            call.key(),
                            path="/v1/messages/count_tokens",
                        )  # fmt: skip
                    logged.answered()
                    content = response.body or b""
                    if response.status >= 400:
                        content = reshaped_as_anthropic(response.status, content)
                    await send_answer(send, response.status, response.headers, content, logged)
                return
            heavy = offload.heavy(len(raw), items_of(body))
            count = await offload.maybe(heavy, self._count, forwarded)
            await send_json(send, 200, orjson.dumps({"input_tokens": count}), logged.headers())
            await logged.finish(200)
        finally:
            if ticket is not None:
                self.s.in_flight.leave(ticket)

    def _count(self, body: dict[str, Any]) -> int:
        lowered = ANTHROPIC.lower(body)
        counter = self.s.engine.counters.for_model(str(body["model"]))
        n = counter.count_messages(lowered.messages) + counter.count_tools(lowered.tools)
        # the images and documents by their size where it can be read, not a flat figure each
        return n + media_correction(body.get("messages"), counter.count_text)


def _parsed(raw: bytes, limits: LimitSettings) -> dict[str, Any]:
    """The body parsed and validated, within the body limits (objects and arrays counted before
    parsing)."""
    check_containers(raw, limits.max_json_containers)
    body = parse_json(raw)
    check_body(body, "messages", limits.max_items)
    validate_count_tokens(body)
    return body
