"""The headers every /ui and /metrics answer carries: the pages show what agents sent (prompts,
tool output, session data), so no browser keeps them (``Cache-Control: no-store``), no other site
frames them (clickjacking: ``frame-ancestors``, ``X-Frame-Options``), and no response is read as
another type than it says. The pages run no script and load only their own stylesheet: the
policy allows nothing else (inline ``style`` attributes colour the charts)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

POLICY = (
    "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)


class PageHeaders:
    """An ASGI app's answers with ``HEADERS`` (replacing any of the same names)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in HEADERS}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": [*kept, *HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)
