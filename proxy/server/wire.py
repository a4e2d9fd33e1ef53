"""What the one handler needs to know of each protocol: how to read a body, which adapter maps it
for the rules, how to call the upstream (natively when it speaks the protocol, through litellm
when it does not) and how errors look."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson

from proxy.errors import BadRequest, ProxyError
from proxy.protocols import errors as shapes
from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.base import Adapter
from proxy.protocols.body import MAX_MODEL_CHARS, parse_json, validate_body
from proxy.protocols.body_memory import BodyMemory, Validate
from proxy.protocols.chat import CHAT
from proxy.protocols.gemini import GEMINI
from proxy.protocols.responses import RESPONSES
from proxy.protocols.validate import validate_anthropic, validate_gemini, validate_responses
from proxy.settings import LimitSettings, UpstreamSettings
from proxy.upstream import UpstreamResponse
from proxy.upstream.gemini import client_key
from proxy.upstream.key_owners import require_owned
from proxy.upstream.openai import upstream_api_key
from proxy.upstream.tenant_ids import scoped_ids

if TYPE_CHECKING:
    from proxy.principals import Principals
    from proxy.server.services import Services


@dataclass(frozen=True)
class Call:
    """One request's upstream call: where to, and what of the client's request it carries."""

    services: Services
    upstream: UpstreamSettings
    headers: Mapping[str, str]  # the client's, names lower-cased
    query: str  # the client's query string (``beta=true``)
    path: str = ""  # the path as routed (Gemini's names the model and the method)
    model: str = ""  # the model asked for (named in the refusal of a key to another provider)
    principal: str = ""  # whose request it is

    def sent(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` as the upstream gets it: with the server's key, the end-user and cache-route
        ids it names scoped to the principal (``tenant_ids``)."""
        if not self.upstream.server_credentials:
            return body
        return scoped_ids(body, partial(self.services.principals.label, self.principal))

    def key(self) -> str | None:
        """The upstream key: config's, else (passthrough) the client's bearer or ``x-api-key``,
        never to another provider's own API (``key_owners``)."""
        mode = self.services.settings.auth.mode
        key = upstream_api_key(self.upstream, self.headers, mode)
        if self.upstream.api_key_env:
            return key
        if key is None and mode == "passthrough":
            key = self.headers.get("x-api-key", "").strip() or None
        require_owned(self.upstream, key, self.model)
        return key


Forward = Callable[[Call, dict[str, Any], bytes | None], Awaitable[UpstreamResponse]]
# The model and whether a stream is asked for, where the path says them, not the body (Gemini)
Target = Callable[[str], tuple[str, bool]]


@dataclass(frozen=True)
class Wire:
    adapter: Adapter
    # a parsed body's validation: ``validate(body, start)``, the array's items from ``start`` on
    validate: Validate
    forward: Forward
    error_body: Callable[[ProxyError], bytes]
    # an error event in a stream, given the last piece relayed before it (a number to follow)
    stream_error: Callable[[ProxyError, bytes], bytes]
    array: str = "messages"  # the body's conversation (``body_memory`` reuses its prefix)
    # its answers carry ids a later request may continue (the Responses API's
    # ``previous_response_id``): each kept to its principal (``proxy.server.response_ids``)
    response_ids: bool = False
    target: Target | None = None
    # the credential the client presents as this protocol's upstream reads it (headers, query
    # string), where that differs from ``principals.credential``: the request's principal is
    # the credential that goes upstream, so two keys never share one
    credential: Callable[[Mapping[str, str], str], str | None] | None = None
    # the upstream is sent every credential header (the Messages relay): all count
    every_credential: bool = False

    def principal(self, principals: Principals, headers: Mapping[str, str], query: str) -> str:
        """The request's principal, from the credential as this protocol's upstream reads it
        (``credential``; else as ``principals.credential`` reads it), or every one it is sent
        (``every_credential``); raises Unauthorized as ``Principals.of`` does."""
        presented = None if self.credential is None else self.credential(headers, query)
        return principals.of(headers, presented, self.every_credential)

    def parse(self, raw: bytes) -> dict[str, Any]:
        """A body parsed whole and validated (the server reads through a ``BodyMemory``)."""
        body = parse_json(raw)
        self.validate(body, 0)
        return body

    def memory(
        self, limits: LimitSettings | None = None, validate: Validate | None = None
    ) -> BodyMemory:
        """A memory of the bodies read (a server's own, one per protocol), holding each body to
        ``limits`` (items, JSON objects and arrays) before it is parsed. ``validate``: another
        validation than the protocol's (a path's own body)."""
        validate = validate or self.validate
        if limits is None:
            return BodyMemory(self.array, validate)
        return BodyMemory(
            self.array,
            validate,
            max_items=limits.max_items,
            max_containers=limits.max_json_containers,
        )


def _payload(body: dict[str, Any], raw: bytes | None) -> bytes:
    return raw if raw is not None else orjson.dumps(body)


async def _chat(call: Call, body: dict[str, Any], raw: bytes | None) -> UpstreamResponse:
    response = await call.services.upstream.chat(call.upstream, body, call.headers, call.key(), raw)
    if response.status >= 400 and response.body is not None:
        _reshaped(response, shapes.reshaped_as_openai(response.status, response.body))
    return response


async def _messages(call: Call, body: dict[str, Any], raw: bytes | None) -> UpstreamResponse:
    """Natively to an ``anthropic`` upstream, bridged by litellm to the others."""
    from proxy.upstream import anthropic

    response = await anthropic.messages(
        call.services.upstream,
        call.upstream,
        _payload(body, raw),
        call.headers,
        call.query,
        call.key(),
        asked=body.get("stream") is True,
    )
    if response.status >= 400 and response.body is not None:
        _reshaped(response, shapes.reshaped_as_anthropic(response.status, response.body))
    return response


async def _responses(call: Call, body: dict[str, Any], raw: bytes | None) -> UpstreamResponse:
    """Natively to an ``openai`` upstream, bridged by litellm to the others."""
    from proxy.upstream import responses

    response = await responses.responses(
        call.services.upstream, call.upstream, _payload(body, raw), call.headers, call.key(),
        asked=body.get("stream") is True,
    )  # fmt: skip
    if response.status >= 400 and response.body is not None:
        _reshaped(response, shapes.reshaped_as_openai(response.status, response.body))
    return response


def gemini_target(path: str) -> tuple[str, bool]:
    """The model and the stream a Gemini path names (``/v1beta/models/{model}:{method}``)."""
    from proxy.upstream.gemini_route import parse_route, valid_model

    route = parse_route(path)
    if route is None or not valid_model(route.model):
        raise BadRequest(
            "The model in the path must be letters, digits, '.', '_' or '-' "
            f"(at most {MAX_MODEL_CHARS} characters).",
            param="model",
        )
    return route.model, route.stream


def gemini_key(call: Call) -> str | None:
    """Config's key; in passthrough, the client's (``x-goog-api-key``, ``?key=``, a bearer)."""
    from proxy.upstream.gemini import client_key

    mode = call.services.settings.auth.mode
    if call.upstream.api_key_env or mode != "passthrough":
        return upstream_api_key(call.upstream, call.headers, mode)
    key = client_key(call.headers, call.query)
    require_owned(call.upstream, key, call.model)
    return key


async def _gemini(call: Call, body: dict[str, Any], raw: bytes | None) -> UpstreamResponse:
    """Natively to a ``gemini`` upstream, bridged by litellm to the others."""
    from proxy.upstream import gemini
    from proxy.upstream.gemini_route import parse_route

    route = parse_route(call.path)
    assert route is not None  # dispatched by its path
    response = await gemini.generate(
        call.services.upstream,
        call.upstream,
        route,
        _payload(body, raw),
        call.headers,
        call.query,
        gemini_key(call),
    )
    if response.status >= 400 and response.body is not None:
        _reshaped(response, shapes.reshaped_as_gemini(response.status, response.body))
    return response


def _reshaped(response: UpstreamResponse, body: bytes) -> None:
    """An error body written anew in the client's shape: JSON, whatever the upstream's was (an
    HTML page from a gateway in front of it, plain text)."""
    if body is not response.body:
        response.body = body
        response.headers = {**response.headers, "content-type": "application/json"}


CHAT_WIRE = Wire(CHAT, validate_body, _chat, shapes.openai_body, shapes.chat_stream_error)
MESSAGES_WIRE = Wire(
    ANTHROPIC,
    validate_anthropic,
    _messages,
    shapes.anthropic_body,
    shapes.anthropic_stream_error,
    every_credential=True,
)
RESPONSES_WIRE = Wire(
    RESPONSES,
    validate_responses,
    _responses,
    shapes.openai_body,
    shapes.responses_stream_error,
    array="input",
    response_ids=True,
)
GEMINI_WIRE = Wire(
    GEMINI,
    validate_gemini,
    _gemini,
    shapes.gemini_body,
    shapes.gemini_stream_error,
    array="contents",
    target=gemini_target,
    credential=client_key,
)
