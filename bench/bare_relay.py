"""The floor under ctxproxy's added latency: a bare relay on the same stack.

    .venv/bin/python -m bench.bare_relay --config ctxproxy.yaml --port 8081

The same server (uvicorn with ``proxy.server.protocol.server_config``, the garbage collector set
as ``ctxproxy serve`` sets it), the same dispatch (``proxy.app.ProxyApp``: the model paths go
straight to a raw ASGI handler), the same upstream client (``UpstreamClient``: one pooled aiohttp
session) and the same forwarding (``proxy.server.wire``: each protocol's ``forward``), with
nothing of the proxy's own in between: the body is read, parsed only for the model routing needs
(``orjson.loads``: the model may be anywhere in the object), forwarded as it came, and the answer
relayed as it comes (whole, or chunk by chunk for a stream). No auth, no body memory, no session,
no rules, no report, no log row, no observers.

``bench.overhead`` and ``bench.overhead_protocols`` start one beside ctxproxy and report its
added latency as the floor: what this stack costs before ctxproxy does anything."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import orjson
import uvicorn
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from proxy.app import MODEL_PATHS, ProxyApp
from proxy.errors import ProxyError
from proxy.server.asgi_send import header_dict, raw_headers, read_body, route_path, send_json
from proxy.server.heap import settle_heap
from proxy.server.protocol import server_config
from proxy.server.wire import CHAT_WIRE, GEMINI_WIRE, MESSAGES_WIRE, RESPONSES_WIRE, Call, Wire
from proxy.settings import Settings, UpstreamSettings, load_settings
from proxy.upstream.openai import UpstreamClient


class BareRelay:
    """One protocol's raw ASGI handler: read, route, forward, relay."""

    def __init__(self, services: Any, wire: Wire) -> None:
        self.s = services
        self.wire = wire

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = header_dict(scope["headers"])
        settings: Settings = self.s.settings
        try:
            raw = await read_body(receive, headers, settings.limits)
            body = orjson.loads(raw)
            path = route_path(scope)  # Gemini's names the model
            model = body["model"] if self.wire.target is None else self.wire.target(path)[0]
            upstream = settings.upstream_for(model)
            if upstream is None:
                await send_json(send, 404, b'{"error":"no upstream"}', {})
                return
            query = scope.get("query_string", b"").decode("latin-1")
            call = Call(self.s, upstream, headers, query, path)
            response = await self.wire.forward(call, body, raw)
        except ProxyError as exc:
            await send_json(send, exc.status, self.wire.error_body(exc), {})
            return
        if response.chunks is None:
            data = response.body or b""
            head = raw_headers(response.headers, len(data))
            await send({"type": "http.response.start", "status": response.status, "headers": head})
            await send({"type": "http.response.body", "body": data})
            return
        head = raw_headers(response.headers, None)
        try:
            await send({"type": "http.response.start", "status": response.status, "headers": head})
            async for chunk in response.chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            if response.close is not None:
                await response.close()


async def _healthz(request: Any) -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")


def create_bare_app(settings: Settings) -> ProxyApp:
    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        upstream = UpstreamClient(settings.limits.upstream_max_connections)
        # what ``Call`` and the wires read of the services: the settings and the upstream client
        services = SimpleNamespace(settings=settings, upstream=upstream)
        wires = {"chat": CHAT_WIRE, "messages": MESSAGES_WIRE, "responses": RESPONSES_WIRE,
                 "gemini": GEMINI_WIRE}  # fmt: skip
        # (count_tokens: not relayed here)
        served = {*MODEL_PATHS.values(), "gemini"} & set(wires)
        app.state.handlers = {name: BareRelay(services, wires[name]) for name in served}
        settle_heap()
        try:
            yield
        finally:
            await upstream.aclose()

    return ProxyApp(routes=[Route("/healthz", _healthz, methods=["GET"])], lifespan=lifespan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="a ctxproxy config (its upstreams)")
    parser.add_argument("--upstream", help="an OpenAI-compatible base URL serving every model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    settings = load_settings(args.config)
    if args.upstream:  # as ``ctxproxy serve --upstream`` reads it
        catch_all = UpstreamSettings(name="cli", match=["*"], kind="openai", base_url=args.upstream)
        settings = settings.model_copy(update={"upstreams": [catch_all]})
    app = create_bare_app(settings)
    uvicorn.Server(server_config(app, settings.server, args.host, args.port)).run()


if __name__ == "__main__":
    main()
