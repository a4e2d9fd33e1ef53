"""``GET /v1/models`` (and ``/models``), answered in the shape of the client that asks: the
Anthropic SDK and Claude Code send ``anthropic-version``, Google's SDK on its ``v1`` API sends
``x-goog-api-key`` (or ``?key=``), the OpenAI SDK neither. Each client's key goes only to an
upstream of its own provider: an Anthropic key sent to the OpenAI upstream would show it to
another provider, and the list that came back was one the client could not read."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from starlette.requests import Request
from starlette.responses import Response

from proxy.errors import ProxyError, TooManyInFlight, UpstreamUnreachable
from proxy.protocols.errors import anthropic_body
from proxy.server.gemini_models import configured_names, gemini_model, gemini_models
from proxy.server.in_flight import holding, retry_headers
from proxy.server.services import Services
from proxy.settings import UpstreamSettings
from proxy.upstream.anthropic import anthropic_headers
from proxy.upstream.gemini_route import system_parameters
from proxy.upstream.key_owners import foreign, foreign_credentials
from proxy.upstream.openai import upstream_api_key

ANTHROPIC_MODELS_PATH = "/v1/models"


def _json(data: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(data), status, headers, media_type="application/json")


def _google_key(request: Request, headers: dict[str, str]) -> bool:
    """Whether the client presents a Google key (google-genai's list and ``models.get``)."""
    return "x-goog-api-key" in headers or bool(system_parameters(request.url.query, "key"))


async def models(request: Request) -> Response:
    headers = {k.lower(): v for k, v in request.headers.items()}
    if "anthropic-version" in headers:
        return await anthropic_models(request, headers)
    if _google_key(request, headers):
        return await gemini_models(request)
    return await openai_models(request, headers)


async def model(request: Request) -> Response:
    """``GET /v1/models/{name}``, one model, in the asking client's shape: google-genai's
    ``models.get`` (a Google key presented), the Anthropic SDK's ``models.retrieve`` (its
    upstream's answer for the name, else the configured name), the OpenAI SDK's (the entry of
    the list ``GET /v1/models`` gives). A name not there: 404 in the client's shape."""
    headers = {k.lower(): v for k, v in request.headers.items()}
    if _google_key(request, headers):
        return await gemini_model(request)
    name = request.path_params["name"]
    if "anthropic-version" in headers:
        return await _anthropic_model(request, headers, name)
    listed = await openai_models(request, headers)
    if listed.status_code != 200:
        return listed
    data = orjson.loads(listed.body).get("data")
    found = next((m for m in data if isinstance(m, dict) and m.get("id") == name), None)
    if found is not None:
        return _json(found, headers=_overhead(request))
    error = {
        "message": f"The model '{name[:200]}' does not exist or you do not have access to it.",
        "type": "invalid_request_error", "param": None, "code": "model_not_found",
    }  # fmt: skip
    return _json({"error": error}, 404)


async def _anthropic_model(request: Request, headers: dict[str, str], name: str) -> Response:
    """The Anthropic upstream's answer for ``name`` (the name one path segment under its fixed
    ``/v1/models``: nothing else of the request reaches the URL), else the configured name."""
    path = f"{ANTHROPIC_MODELS_PATH}/{quote(name, safe='')}"
    asked = await _ask_anthropic(request, headers, path, "")
    if asked is not None:
        return asked
    if name in configured_names(request.app.state.services):
        entry = {"type": "model", "id": name, "display_name": name}
        return _json({**entry, "created_at": "1970-01-01T00:00:00Z"})
    message = f"model: {name[:200]}"
    return _json({"type": "error", "error": {"type": "not_found_error", "message": message}}, 404)


async def _ask_anthropic(
    request: Request, headers: dict[str, str], path: str, query: str
) -> Response | None:
    """The Anthropic upstream's answer at ``path`` (an error of ours in Anthropic's shape); None
    where there is no such upstream or the client's key is another provider's (not sent to
    Anthropic's API: the caller answers from the configured names)."""
    services: Services = request.app.state.services
    try:
        principal = services.principals.of(headers, every=True)
        upstream = _anthropic_upstream(services)
        shared = upstream is not None and bool(upstream.api_key_env)
        if upstream is None or not (shared or not foreign_credentials(upstream, headers)):
            return None
        key = upstream_api_key(upstream, headers, services.settings.auth.mode)
        sent = anthropic_headers(upstream, headers, key)
        overhead = _overhead(request)
        # an upstream connection held: one of the principal's requests in flight
        lane = services.principals.lane(principal, request.scope.get("client"))
        with holding(services.in_flight, lane):
            status, content = await services.upstream.models(upstream, key, path, sent, query)
        return Response(content, status, overhead, media_type="application/json")
    except ProxyError as exc:
        return Response(
            anthropic_body(exc), exc.status, retry_headers(exc), media_type="application/json"
        )


def _overhead(request: Request) -> dict[str, str]:
    """The time before the upstream call (``x-ctxproxy-overhead-ms``), when it is known."""
    started = request.scope.get("state", {}).get("overhead_started")
    if started is None:
        return {}
    return {"x-ctxproxy-overhead-ms": f"{(time.perf_counter() - started) * 1000:.3f}"}


async def anthropic_models(request: Request, headers: dict[str, str]) -> Response:
    """The Anthropic upstream's own list, relayed as it answered (its pages: ``after_id``,
    ``limit``); with no Anthropic upstream, the configured names in Anthropic's shape."""
    asked = await _ask_anthropic(request, headers, ANTHROPIC_MODELS_PATH, _pages(request))
    if asked is not None:
        return asked
    services: Services = request.app.state.services
    names = configured_names(services)
    data = [
        {"type": "model", "id": n, "display_name": n, "created_at": "1970-01-01T00:00:00Z"}
        for n in names
    ]
    first, last = (names[0], names[-1]) if names else (None, None)
    return _json({"data": data, "has_more": False, "first_id": first, "last_id": last})


# the list's own parameters: any other is the upstream's to read, not a client's to steer (an
# ``api-version``, a ``key``, sent with the server's credential)
_PAGES = ("after_id", "before_id", "limit")


def _pages(request: Request) -> str:
    """The query's paging parameters, encoded again."""
    kept = [(k, v) for k, v in request.query_params.multi_items() if k in _PAGES]
    return urlencode(kept)


def _anthropic_upstream(services: Services) -> UpstreamSettings | None:
    """The upstream Claude models go to natively: the first of Anthropic's kind."""
    return next((u for u in services.settings.upstreams if u.kind == "anthropic"), None)


async def openai_models(request: Request, headers: dict[str, str]) -> Response:
    """The catch-all OpenAI upstream's list with the configured names added, or those names
    alone with why the upstream's could not be had."""
    services: Services = request.app.state.services
    try:
        principal = services.principals.of(headers)
    except ProxyError as exc:
        return Response(exc.body_bytes(), exc.status, media_type="application/json")
    names = configured_names(services)
    catch_all = next(
        (u for u in services.settings.upstreams if u.kind == "openai" and u.serves("\x00any")), None
    )
    overhead: dict[str, str] = {}  # the time before the upstream call, when there is one
    unlisted: dict[str, str] | None = None  # the catch-all upstream's list could not be had
    if catch_all is not None:
        overhead = _overhead(request)
        try:
            key = upstream_api_key(catch_all, headers, services.settings.auth.mode)
            owners = None if catch_all.api_key_env else foreign(catch_all, key)
            if owners is not None:  # another provider's key is not sent to this one's API
                raise UpstreamUnreachable(
                    f"the key sent is {owners[0]}'s, not sent to {owners[1]}'s API"
                )
            lane = services.principals.lane(principal, request.scope.get("client"))
            with holding(services.in_flight, lane):  # as a model request: in flight
                status, content = await services.upstream.models(catch_all, key)
            if status in (401, 403):  # the key is refused: say so, not a made-up list
                return Response(content, status, overhead, media_type="application/json")
            listed = orjson.loads(content) if status == 200 else None
            if isinstance(listed, dict) and isinstance(listed.get("data"), list):
                ids = (m.get("id") for m in listed["data"] if isinstance(m, dict))
                have = {i for i in ids if isinstance(i, str)}  # an id of another type: none
                listed["data"].extend(_model_entry(n) for n in names if n not in have)
                return _json(listed, headers=overhead)
            why = f"it answered {status} without a model list"
        except TooManyInFlight as exc:  # the client's own bound: said, not a list without it
            return Response(exc.body_bytes(), exc.status, retry_headers(exc),
                            media_type="application/json")  # fmt: skip
        except ProxyError as exc:
            why = exc.message
        except orjson.JSONDecodeError:
            why = "its answer was not JSON"
        # said, not hidden: a list of the configured names alone reads as "no models"
        unlisted = {"upstream": catch_all.name, "error": f"could not list its models: {why}"}
    answer: dict[str, Any] = {"object": "list", "data": [_model_entry(n) for n in names]}
    if unlisted is not None:
        answer["ctxproxy_unlisted"] = unlisted
        overhead["x-ctxproxy-upstream-unlisted"] = unlisted["upstream"]
    return _json(answer, headers=overhead)


def _model_entry(name: str) -> dict[str, object]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "ctxproxy"}
