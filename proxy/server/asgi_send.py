"""The raw ASGI side of the model endpoints (raw ASGI apps, no framework): a request's headers as
a dict, its body read within the limits, header values, headers as bytes, a JSON answer."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from urllib.parse import quote

from starlette.types import Receive, Scope, Send

from proxy.errors import ClientGone, PayloadTooLarge, RequestTimeout
from proxy.server.body_encoding import coding_of, decoded
from proxy.settings import LimitSettings


def header_dict(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """A request's headers by lower-cased name; a repeated header's values joined with ", "
    (as HTTP allows: ``anthropic-beta`` may come as several lines)."""
    out: dict[str, str] = {}
    for k, v in raw:
        name, value = k.decode("latin-1").lower(), v.decode("latin-1")
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def header_value(text: str) -> str:
    """A client-chosen id as a header value: printable ASCII kept, anything else (non-latin-1
    characters, control characters, spaces) and ``%`` itself percent-encoded (UTF-8)."""
    return quote(text, safe=_HEADER_SAFE)


_HEADER_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


def raw_headers(headers: dict[str, str], length: int | None) -> list[tuple[bytes, bytes]]:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    # (relay_headers already left out upstream values that cannot be sent)
    if length is not None:
        raw.append((b"content-length", str(length).encode()))
    return raw


async def send_json(send: Send, status: int, body: bytes, headers: dict[str, str]) -> None:
    raw = raw_headers({**headers, "content-type": "application/json"}, len(body))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def request_id() -> str:
    """A new request id: the log row's key and the ``x-ctxproxy-request-id`` header."""
    return "req_" + os.urandom(12).hex()  # 96 random bits (uuid4's object and hex cost ~4x)


async def read_body(
    receive: Receive,
    headers: dict[str, str],
    limits: LimitSettings,
    charge: Callable[[int], None] | None = None,
) -> bytes:
    """The request body, read to its end within ``limits`` (size, time) and decoded if it came
    compressed (``body_encoding``); a client leaving is ``ClientGone``. ``charge`` is told the
    bytes read so far as they grow, and may refuse them by raising (``InFlight.grower``). A
    decoded body is counted by the caller once decoded: one is decoded at a time."""
    coding = coding_of(headers.get("content-encoding"))  # refused before reading
    raw = await _read_raw(receive, headers, limits, charge)
    return raw if coding is None else await decoded(raw, coding, limits.max_body_bytes)


async def _read_raw(
    receive: Receive,
    headers: dict[str, str],
    limits: LimitSettings,
    charge: Callable[[int], None] | None,
) -> bytes:
    limit = limits.max_body_bytes
    declared = headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"Request body is {declared} bytes; the limit is {limit} bytes.")
    chunks, size = [], 0
    try:
        async with asyncio.timeout(limits.body_read_timeout_s):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone("Client disconnected.")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise PayloadTooLarge(f"Request body exceeds the limit of {limit} bytes.")
                if charge is not None:  # a body with no declared length is counted as it comes
                    charge(size)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    except TimeoutError:
        raise RequestTimeout(
            f"The request body was not received within {limits.body_read_timeout_s:g} s "
            f"({size} bytes arrived).",
            code="request_timeout",
        ) from None


def route_path(scope: Scope) -> str:
    """The path as the router sees it: without the root path (uvicorn --root-path, a mount)."""
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] == "/":
        return path[len(root) :]
    return path
