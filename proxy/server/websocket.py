"""Codex's built-in OpenAI provider first asks to upgrade ``/v1/responses`` to a websocket. The
proxy does not serve the websocket transport. Under ``ctxproxy serve`` the HTTP protocol refuses
every upgrade with 426 before the app sees it (``proxy.server.protocol``); this is the app's own
refusal for other ASGI servers: 426 where the server lets an app deny a handshake with a
response, a close otherwise."""

from __future__ import annotations

from starlette.types import Receive, Scope, Send

from proxy.server.asgi_send import route_path
from proxy.server.protocol import ws_message


async def refuse_websocket(scope: Scope, receive: Receive, send: Send) -> None:
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    if "websocket.http.response" in scope.get("extensions", {}):
        headers = [(b"content-type", b"application/json")]
        await send({"type": "websocket.http.response.start", "status": 426, "headers": headers})
        body = ws_message(route_path(scope).encode())  # in the protocol of the path
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008})
