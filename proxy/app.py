"""The app factory: everything with a lifetime (store, upstream pool, engine) is built in the
lifespan and hangs off ``app.state.services``; there is no module-level mutable state."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, request_response
from starlette.types import Message, Receive, Scope, Send

from proxy.inspect import ui
from proxy.inspect.page_headers import PageHeaders
from proxy.known_secrets import name_known_secrets
from proxy.principals import Principals, no_keys_problem
from proxy.protocols.errors import anthropic_error, gemini_error
from proxy.rewrite.engine import Engine
from proxy.server.asgi_send import request_id as new_request_id
from proxy.server.asgi_send import route_path as route_path
from proxy.server.count_tokens import CountTokens
from proxy.server.gemini_models import gemini_model, gemini_models
from proxy.server.gemini_routes import GeminiCountTokens, gemini_endpoint
from proxy.server.handler import ProtocolHandler
from proxy.server.model_lists import model, models
from proxy.server.openai_relay import RELAYED_PATHS, relay
from proxy.server.protocol import ws_message
from proxy.server.services import Services
from proxy.server.websocket import refuse_websocket
from proxy.server.wire import CHAT_WIRE, GEMINI_WIRE, MESSAGES_WIRE, RESPONSES_WIRE
from proxy.settings import Settings, SettingsError
from proxy.startup import overridden_shorthands, unreachable_upstreams, unset_key_variables
from proxy.store import retention
from proxy.store.factory import create_store
from proxy.store.secrets import server_secret
from proxy.telemetry import jsonlog, metrics
from proxy.telemetry.health import readyz
from proxy.tokens import TokenCounters, ensure_offline_tiktoken
from proxy.upstream.error_redaction import ErrorRedactor
from proxy.upstream.openai import UpstreamClient
from rules import packs

log = logging.getLogger("ctxproxy.app")


async def healthz(request: Request) -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")


CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
# The model endpoints, each a raw ASGI handler (``app.state.handlers``) for POST.
MODEL_PATHS = {
    "/v1/chat/completions": "chat",
    "/chat/completions": "chat",
    "/v1/messages": "messages",
    "/v1/messages/count_tokens": "count_tokens",
    "/v1/responses": "responses",
    "/responses": "responses",
}
ANTHROPIC_PATHS = frozenset({"/v1/messages", "/v1/messages/count_tokens"})


class ProxyApp(Starlette):
    """Starlette, with the model endpoints dispatched straight to their raw ASGI handlers: the hot
    path skips routing and the middleware stack; every other path goes through Starlette."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # the path as routed: under a root path (uvicorn --root-path, a mount) it is stripped
        if scope["type"] == "http":
            path = route_path(scope)
            endpoint = MODEL_PATHS.get(path)
            if endpoint is not None:
                if scope["method"] == "POST":
                    scope["app"] = self
                    await self.state.handlers[endpoint](scope, receive, send)
                    return
                if _stripped_handshake(scope):
                    # a websocket handshake whose Upgrade a front (nginx) dropped: the 426 the
                    # server answers an upgrade with, on which Codex falls back to HTTPS at once
                    # (to a 405 it retried for 6 s)
                    body = ws_message(path.encode())
                    upgrade = Response(body, 426, {"connection": "close"}, "application/json")
                    await upgrade(scope, receive, _with_request_headers(scope, send))
                    return
                message = f"{_clip(scope['method'])} is not allowed on {_clip(path)}."
                answer = error_response(
                    405,
                    message,
                    "method_not_allowed",
                    {"allow": "POST"},
                    anthropic=path in ANTHROPIC_PATHS,
                )
                await answer(scope, receive, _with_request_headers(scope, send))
                return
            if path in RELAYED_PATHS:  # embeddings, moderations: relayed, no rule runs
                sent = _with_request_headers(scope, send)
                if scope["method"] == "POST":
                    await relay(self.state.services, path, scope, receive, sent)
                else:
                    message = f"{_clip(scope['method'])} is not allowed on {_clip(path)}."
                    answer = error_response(405, message, "method_not_allowed", {"allow": "POST"})
                    await answer(scope, receive, sent)
                return
            gemini, refusal = gemini_endpoint(path, scope["method"])
            if gemini is not None:
                scope["app"] = self
                await self.state.handlers[gemini](scope, receive, send)
                return
            if refusal is not None:
                await refusal(scope, receive, _with_request_headers(scope, send))
                return
            if path == "/api/hello":  # Claude Code's connectivity probe: answered at once
                await Response(b"", 200)(scope, receive, send)
                return
        if scope["type"] == "websocket" and route_path(scope) in ("/v1/responses", "/responses"):
            await refuse_websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        await super().__call__(scope, receive, _with_request_headers(scope, send))


def _with_request_headers(scope: Scope, send: Send) -> Send:
    """Every response carries ``x-ctxproxy-request-id`` and ``x-ctxproxy-overhead-ms``: for paths
    with no upstream call the overhead is the whole handling time; ``/v1/models`` sets its own
    (the time before its upstream call)."""
    started = time.perf_counter()
    request_id = new_request_id()
    scope.setdefault("state", {})["overhead_started"] = started

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            names = {k.lower() for k, _ in headers}
            if b"x-ctxproxy-request-id" not in names:
                headers.append((b"x-ctxproxy-request-id", request_id.encode()))
            if b"x-ctxproxy-overhead-ms" not in names:
                elapsed = (time.perf_counter() - started) * 1000
                headers.append((b"x-ctxproxy-overhead-ms", f"{elapsed:.3f}".encode()))
            message = {**message, "headers": headers}
        await send(message)

    return wrapped


def _stripped_handshake(scope: Scope) -> bool:
    """A ``GET`` carrying a websocket handshake's key (its ``Upgrade`` dropped on the way)."""
    return scope["method"] == "GET" and any(
        name == b"sec-websocket-key" for name, _ in scope.get("headers") or ()
    )


async def http_error(request: Request, exc: Exception) -> Response:
    """Unknown paths (404) and wrong methods (405) in OpenAI's error shape, not plain text."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        message = f"{_clip(request.method)} is not allowed on {_clip(request.url.path)}."
        code: str | None = "method_not_allowed"
    elif exc.status_code == 404:
        message = f"Unknown path {_clip(request.url.path)}."
        code = "not_found"
    else:
        message, code = str(exc.detail), None
    path = route_path(request.scope)
    headers = request.headers
    # the client's own error shape: Gemini's API (google-genai also calls /v1/… with its key),
    # Anthropic's (its SDK sends anthropic-version on every path), else OpenAI's
    gemini = path.startswith("/v1beta/") or "x-goog-api-key" in headers
    if gemini and "anthropic-version" not in headers:
        content = gemini_error(exc.status_code, message)
        return Response(content, exc.status_code, dict(exc.headers or {}), "application/json")
    anthropic = path.startswith("/v1/messages") or "anthropic-version" in headers
    return error_response(exc.status_code, message, code, exc.headers, anthropic=anthropic)


def error_response(
    status: int,
    message: str,
    code: str | None,
    headers: Mapping[str, str] | None = None,
    anthropic: bool = False,
) -> Response:
    """An error of the router (no such path, wrong method) in OpenAI's shape, or Anthropic's on
    Anthropic's paths."""
    if anthropic:
        content = anthropic_error(status, message)
    else:
        content = orjson.dumps({"error": {"message": message, "type": "invalid_request_error",
                                          "param": None, "code": code}})  # fmt: skip
    return Response(content, status, dict(headers or {}), "application/json")


def _clip(text: str, limit: int = 80) -> str:
    """Client text quoted in an error, bounded."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def create_app(
    settings: Settings,
    db_path: str | None = None,
    strict: bool = False,
    budget_override: int | None = None,
) -> ProxyApp:
    ensure_offline_tiktoken()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # SQLite (db_path or store.path) or PostgreSQL (store.url, CTXPROXY_STORE_URL)
        store = create_store(
            settings.store, db_path, max_state_bytes=settings.limits.max_state_bytes
        )
        await store.open()
        secret = await server_secret(store)
        principals = Principals(settings.auth, secret)
        if (problem := no_keys_problem(settings.auth)) is not None:
            await store.close()
            raise SettingsError(problem)
        warnings = unset_key_variables(settings, os.environ) + unreachable_upstreams(settings)
        warnings += overridden_shorthands(settings)
        for warning in warnings:
            log.warning(warning)
        counters = TokenCounters()
        counters.preload()  # load the encodings now, not on the first request (~0.5 s each)
        packs.preload()  # and the rules' packs, not in the first request that reads one
        engine = Engine(settings, store, counters, budget_override, strict=strict)
        engine.session_salt = secret
        await engine.recall_windows(time.time())
        # the server-side keys, read once: redacted from the upstreams' errors to the client,
        # and from everything stored, logged or shown (``rules.redact_known``)
        errors = ErrorRedactor.for_upstreams(settings.upstreams)
        name_known_secrets(settings)
        upstream = UpstreamClient(settings.limits.upstream_max_connections, errors)
        services = Services(settings, store, engine, upstream, principals)
        app.state.services = services
        services.observers.add(store.lull)  # the store's writer works between requests
        messages = ProtocolHandler(services, MESSAGES_WIRE)
        app.state.handlers = {
            "chat": ProtocolHandler(services, CHAT_WIRE),
            "messages": messages,
            "responses": ProtocolHandler(services, RESPONSES_WIRE),
            # a count names files as a message does: those relayed to the principal alone
            "count_tokens": CountTokens(services, messages.kept_ids),
            "gemini": ProtocolHandler(services, GEMINI_WIRE),
            "gemini_count": GeminiCountTokens(services),
        }
        app.state.started_at = time.time()
        for hook in app.state.setup_hooks:
            hook(app, services)
        pruner = retention.start(
            store, settings.store.retention_days, settings.store.session_ttl_days
        )
        try:
            yield
        finally:
            await retention.stop(pruner)
            engine.close()
            await upstream.aclose()
            await store.close()
            name_known_secrets(None)  # this server's keys go with it

    routes = [
        Route("/v1/models", models, methods=["GET"]),
        Route("/models", models, methods=["GET"]),
        Route("/v1beta/models", gemini_models, methods=["GET"]),
        Route("/v1beta/models/{name}", gemini_model, methods=["GET"]),
        Route("/v1/models/{name}", model, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", PageHeaders(request_response(metrics.metrics_endpoint)), methods=["GET"]),
        *ui.routes(),
    ]
    app = ProxyApp(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={404: http_error, 405: http_error},
    )
    app.state.setup_hooks = [metrics.setup, jsonlog.setup]
    return app
