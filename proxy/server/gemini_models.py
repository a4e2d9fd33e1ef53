"""``GET /v1beta/models`` and ``GET /v1beta/models/{name}``: google-genai's ``models.list`` and
``models.get`` (on its ``v1`` API, ``/v1/models…`` with a Google key). The first ``kind: gemini``
upstream's own answer is relayed, its list with the names ``upstreams:`` match exactly added; a
name another upstream serves, and every name where there is no such upstream (or the client's
key is another provider's, which is not sent to Google), is listed from the configuration.
A tool reading a model's ``inputTokenLimit`` got an empty list, and a 404 for the model."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import orjson
from starlette.requests import Request
from starlette.responses import Response

from proxy.errors import ProxyError, TooManyInFlight
from proxy.protocols.errors import gemini_body, gemini_error, reshaped_as_gemini
from proxy.server.in_flight import holding, retry_headers
from proxy.server.services import Services
from proxy.server.wire import Call, gemini_key
from proxy.settings import UpstreamSettings
from proxy.upstream.gemini import client_key, gemini_headers
from proxy.upstream.gemini_route import valid_model

_JSON = "application/json"

METHODS = ["generateContent", "streamGenerateContent", "countTokens"]
_PAGES = ("pageSize", "pageToken")  # the list's own parameters; never ``key``
_LIST_PATH = "/v1beta/models"


def _json(data: object, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status, media_type="application/json")


def _entry(name: str) -> dict[str, Any]:
    return {"name": f"models/{name}", "displayName": name, "supportedGenerationMethods": METHODS}


def configured_names(services: Services) -> list[str]:
    """The model names the upstreams match exactly (a glob names no model)."""
    return sorted(
        {p for u in services.settings.upstreams for p in u.match if not any(c in p for c in "*?[")}
    )


async def gemini_models(request: Request) -> Response:
    """The Gemini upstream's list (its pages: ``pageSize``, ``pageToken``) with the configured
    names it does not list; a 4xx of it (a key refused) as it answered; else the configured
    names alone."""
    services: Services = request.app.state.services
    headers, principal, refused = _principal(request)
    if refused is not None:
        return refused
    names = configured_names(services)
    upstream = next((u for u in services.settings.upstreams if u.kind == "gemini"), None)
    pages = urlencode([(k, v) for k, v in request.query_params.multi_items() if k in _PAGES])
    try:
        relayed = await _relayed(request, upstream, headers, principal, _LIST_PATH, pages)
    except TooManyInFlight as exc:
        return _too_many(exc)
    if relayed is not None:
        status, content = relayed
        if 400 <= status < 500:  # in Gemini's shape: a gateway's page, another API's JSON
            return Response(reshaped_as_gemini(status, content), status, media_type=_JSON)
        listed = _object(content) if status == 200 else None
        models = listed.get("models") if listed is not None else None
        if listed is not None and (models is None or isinstance(models, list)):
            models = models or []
            have = {m.get("name") for m in models if isinstance(m, dict)}
            extra = [n for n in names if f"models/{n}" not in have]
            if "nextPageToken" not in listed:  # the last page: the configured names after it
                models.extend(_entry(n) for n in extra)
            return _json({**listed, "models": models})
    return _json({"models": [_entry(n) for n in names]})


async def gemini_model(request: Request) -> Response:
    """One model: the Gemini upstream's own answer for a name it serves; a name another upstream
    serves, from the configuration; else Google's 404."""
    services: Services = request.app.state.services
    headers, principal, refused = _principal(request)
    if refused is not None:
        return refused
    name = str(request.path_params["name"]).removeprefix("models/")
    if not valid_model(name):
        return Response(gemini_error(400, "A model name holds letters, digits, '.', '_' and "
                                      "'-' only."), 400, media_type="application/json")  # fmt: skip
    upstream = services.settings.upstream_for(name)
    if upstream is not None and upstream.kind == "gemini":
        try:
            relayed = await _relayed(request, upstream, headers, principal, f"{_LIST_PATH}/{name}")
        except TooManyInFlight as exc:
            return _too_many(exc)
        if relayed is not None and 400 <= relayed[0] < 500:
            status = relayed[0]
            return Response(reshaped_as_gemini(status, relayed[1]), status, media_type=_JSON)
        if relayed is not None and relayed[0] < 400:
            return Response(relayed[1], relayed[0], media_type=_JSON)
    if upstream is not None:
        return _json(_entry(name))
    message = f"models/{name} is not found: no configured upstream serves it."
    return Response(gemini_error(404, message), 404, media_type="application/json")


def _principal(request: Request) -> tuple[dict[str, str], str, Response | None]:
    """(headers, the principal, None), or the answer refusing the request."""
    services: Services = request.app.state.services
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        principal = services.principals.of(headers, client_key(headers, request.url.query))
    except ProxyError as exc:
        return headers, "", Response(gemini_body(exc), exc.status, media_type=_JSON)
    return headers, principal, None


def _too_many(exc: TooManyInFlight) -> Response:
    return Response(gemini_body(exc), exc.status, retry_headers(exc), media_type=_JSON)


async def _relayed(
    request: Request,
    upstream: UpstreamSettings | None,
    headers: dict[str, str],
    principal: str,
    path: str,
    query: str = "",
) -> tuple[int, bytes] | None:
    """(status, body) of the upstream's answer to ``GET path``; None without one (no Gemini
    upstream, a key that may not go to it, an upstream out of reach). The call holds an upstream
    connection, so it counts among the principal's requests in flight: ``TooManyInFlight``
    past their bound."""
    if upstream is None:
        return None
    services: Services = request.app.state.services
    call = Call(services, upstream, headers, request.url.query, model=path.rpartition("/")[2])
    try:
        key = gemini_key(call)  # config's; in passthrough the client's, never another's
        sent = gemini_headers(upstream, headers, key)
    except ProxyError:
        return None
    lane = services.principals.lane(principal, request.scope.get("client"))
    with holding(services.in_flight, lane):
        try:
            return await services.upstream.models(upstream, key, path, sent, query)
        except ProxyError:
            return None


def _object(content: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
