"""The pieces of the native relay every protocol shares (chat completions, Anthropic messages,
Responses): which response headers go back, the environment's proxy for an upstream, one POST on
the pooled aiohttp session with its failures mapped to ``proxy.errors``, and a streamed body
relayed as it arrives. ``UpstreamClient`` (``openai``) owns the session; this module owns none."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from typing import Any
from urllib.parse import quote

import aiohttp
from yarl import URL

from proxy.errors import UpstreamFailed, UpstreamTimeout, UpstreamUnreachable
from proxy.upstream import UpstreamResponse
from rules.redact import redact_text

log = logging.getLogger("ctxproxy.upstream")

# Request headers every protocol forwards to its upstream (as Messages forwards all but a few):
# a retry's idempotency key and W3C trace context. None chooses an upstream, a URL or a key.
REQUEST_CONTEXT_HEADERS = ("idempotency-key", "traceparent", "tracestate")
# Response headers worth relaying (rate limits, request ids); hop-by-hop and length are not, nor
# content-encoding: we ask for identity, and what an upstream (or a gateway before it) compresses
# anyway is decoded as it arrives (the session's ``auto_decompress``), since the proxy reads the
# answer (usage, error events, ids) and the client gets it decoded.
RELAYED_NAMES = frozenset({"content-type"})
# ``x-should-retry``: the provider's word on retrying, which OpenAI's and Anthropic's SDKs obey
# over their own rule (a 500 it says not to retry, a 400 it says to)
RELAYED_PREFIXES = (
    "x-ratelimit-", "openai-", "x-request-id", "retry-after", "anthropic-", "x-should-retry",
)  # fmt: skip
# Anthropic names its request id plainly ("request-id"); its SDKs show it in errors.
ANTHROPIC_RELAYED_NAMES = RELAYED_NAMES | {"request-id"}
# Errors aiohttp raises for a connection that failed or broke (TimeoutError is caught before).
CONNECTION_ERRORS = (aiohttp.ClientError, OSError)
# A whole answer is read into memory, and an error answer is parsed and redacted: bounded. A
# success answer over its bound is refused (502); an error answer is cut to its bound (its status
# and its start are what a client reads).
MAX_ANSWER_BYTES = 64 * 1024 * 1024
MAX_ERROR_ANSWER_BYTES = 1024 * 1024
YIELD_BYTES = 256 * 1024  # a body relayed this far without a wait lets the loop go
# A read is passed on in pieces of at most ``SLICE_BYTES``, and the loop is let go once the
# relay's work has held it ``TURN_S``: what the relay does to a piece (the usage tap, the error
# scanner, the answer's end, the send) is linear in it, and one read can hold half a MiB of
# events (a 532 KB read of tiny events each naming "usage" and "error" held the loop ~200 ms).
SLICE_BYTES = 16 * 1024
TURN_S = 0.004
# The codings aiohttp decodes (br and zstd only with their modules: else it fails the answer, see
# ``undecodable``); any other is refused rather than relayed undecoded under no header.
DECODED = frozenset({"", "identity", "gzip", "deflate", "br", "zstd"})


def relay_headers(
    headers: Iterable[tuple[bytes, bytes]] | Mapping[str, str],
    names: frozenset[str] = RELAYED_NAMES,
) -> dict[str, str]:
    """The response headers worth relaying: ``names`` exactly, and ``RELAYED_PREFIXES``. Raw
    header bytes are read as latin-1, so they go back out byte for byte; a value holding control
    characters (which no HTTP server may send on) is left out rather than failing an answer the
    upstream already gave."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out = {}
    for k, v in pairs:
        name = (k.decode("latin-1") if isinstance(k, bytes) else k).lower()
        if name in names or name.startswith(RELAYED_PREFIXES):
            value = v.decode("latin-1") if isinstance(v, bytes) else v
            if _sendable(value):
                out[name] = value
    return out


def _sendable(value: str) -> bool:
    """A header value uvicorn will send: latin-1, no control characters but tab."""
    return _UNSENDABLE.search(value) is None


_UNSENDABLE = re.compile(r"[^\t\x20-\x7e\x80-\xff]")


def env_proxy(url: URL) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The proxy ``HTTP_PROXY``/``HTTPS_PROXY`` name for ``url`` unless ``NO_PROXY`` exempts
    its host (as httpx and aiohttp's ``trust_env`` read them); credentials in the proxy URL
    become its Basic auth."""
    if url.host is None or urllib.request.proxy_bypass(url.host):
        return None, None
    found = urllib.request.getproxies().get(url.scheme or "")
    if not found:
        return None, None
    proxy = URL(found if "://" in found else f"http://{found}")
    if proxy.scheme not in ("http", "https"):
        # aiohttp speaks only HTTP proxies: a socks5:// one would get our HTTP request on its
        # SOCKS port and fail every call
        log.warning(
            "ignoring the %s proxy for %s: only http(s) proxies are supported",
            proxy.scheme,
            url.scheme,
        )
        return None, None
    auth = aiohttp.BasicAuth.from_url(proxy)
    return proxy.with_user(None), auth


def encoded_query(query: str) -> str:
    """A client's query string as it may stand in our request line: what is already valid there
    (``beta=true``, ``%2F`` escapes) is kept byte for byte, anything else percent-encoded."""
    return quote(query, safe="!$&'()*+,;=:@/?%-._~")


def is_event_stream(headers: Mapping[str, str]) -> bool:
    return "text/event-stream" in headers.get("content-type", "").lower()  # of any case


# What an upstream's answer to a request for a stream may be labelled that says nothing against
# its being one (a gateway's default, a server that names no type): read as an event stream.
_UNLABELLED = frozenset(("", "text/plain", "application/octet-stream"))


# Success statuses whose answer has no body (RFC 9110 15.3.5, 15.3.6)
_BODILESS = frozenset((204, 205))


def mislabelled_stream(headers: Mapping[str, str]) -> bool:
    """Whether an answer to a request for a stream is labelled as no other kind of answer (JSON,
    an event stream, a page)."""
    kind = headers.get("content-type", "").partition(";")[0].strip().lower()
    return kind in _UNLABELLED


async def answer(
    response: aiohttp.ClientResponse,
    name: str,
    stream: bool,
    names: frozenset[str],
    json_array: bool = False,
    passthrough: bool = False,
    asked: bool = True,
) -> UpstreamResponse:
    """``response`` as relayed: an event stream (when ``stream`` was asked for and the upstream
    answered one with success) piece by piece; with ``json_array``, a JSON answer to a stream
    asked for (Gemini's JSON-array stream) element by element; with ``passthrough``, any success
    answer piece by piece, as it comes (``extra["passthrough"]``: no rule nor error scan reads
    it); anything else read whole. ``asked``: whether the client asked for a stream (the
    Messages and Responses relays take an event stream either way, but only a request for one
    has an answer labelled as text read as one)."""
    status = response.status
    if not (200 <= status < 300 or 400 <= status < 600):
        # a redirect (not followed: the request carries the client's key), an upgrade, a status
        # HTTP has no class for: no answer a client of this API can use
        response.close()
        raise UpstreamFailed(f"Upstream {name} answered HTTP {status}, which is not relayed.")
    coding = response.headers.get("content-encoding", "").strip().lower()
    if coding not in DECODED:
        response.close()
        raise undecodable_answer(name)
    headers = relay_headers(response.raw_headers, names)
    if status in _BODILESS:  # read whole (nothing): a stream's relay would write into no body
        stream = passthrough = False
    if passthrough and response.status < 400:
        chunks = raw_chunks(response, name)
        extra = {"passthrough": True}
        return UpstreamResponse(status, headers, chunks=chunks, close=closer(response), extra=extra)
    if stream and asked and status < 400 and not json_array and mislabelled_stream(headers):
        # an event stream said to be text (or nothing): relayed as one, so that an answer cut
        # before its last event is told as a stream's is, not taken for a whole answer
        headers["content-type"] = "text/event-stream; charset=utf-8"
    if stream and response.status < 400 and is_event_stream(headers):
        return UpstreamResponse(
            response.status, headers, chunks=raw_chunks(response, name), close=closer(response)
        )
    if stream and json_array and response.status < 400 and not is_event_stream(headers):
        from proxy.upstream.json_array_stream import array_stream

        chunks = raw_chunks(response, name)
        return array_stream(response.status, headers, chunks, closer(response))
    error = status >= 400
    limit = MAX_ERROR_ANSWER_BYTES if error else MAX_ANSWER_BYTES
    try:
        content, whole = await read_bounded(response, limit)
    except TimeoutError:
        response.close()
        raise UpstreamTimeout(f"Upstream {name} timed out reading the body") from None
    except CONNECTION_ERRORS as exc:
        response.close()
        raise unreachable(name, "broke off", exc) from None
    except asyncio.CancelledError:  # the answer's bound, or the client gone: not pooled half-read
        response.close()
        raise
    if whole:
        response.release()
    else:  # the rest is not read: the connection cannot be reused
        response.close()
        if not error:
            raise UpstreamFailed(
                f"Upstream {name}'s answer is larger than {limit >> 20} MiB, which is not relayed."
            )
        log.warning("upstream %s: an error answer over %d bytes was cut", name, limit)
    return UpstreamResponse(response.status, headers, body=content)


async def read_bounded(response: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """The body (decoded) up to ``limit`` bytes, and whether that was all of it."""
    length = response.content_length
    # a compressed body's length says nothing of its decoded size: that is counted as it comes
    if length is not None and length <= limit and not _compressed(response):
        return await response.read(), True  # the common case: one read, as it was
    parts: list[bytes] = []
    size = 0
    turn = time.perf_counter()
    async for chunk in response.content.iter_any():
        if size + len(chunk) > limit:  # what is past the bound is never joined nor copied
            parts.append(chunk[: limit - size])
            return b"".join(parts), False
        parts.append(chunk)
        size += len(chunk)
        # decoded pieces come with no wait for the socket: the loop is let go as in raw_chunks
        # (a 200 KB gzip of 300 MB held it 250-320 ms, and its whole cut was copied twice)
        if time.perf_counter() - turn >= TURN_S:
            await asyncio.sleep(0)
            turn = time.perf_counter()
    return b"".join(parts), True


def _compressed(response: aiohttp.ClientResponse) -> bool:
    return response.headers.get("content-encoding", "identity").strip().lower() != "identity"


async def raw_chunks(response: aiohttp.ClientResponse, name: str) -> AsyncIterator[bytes]:
    """The body as it arrives: de-chunked and decoded, in pieces of at most ``SLICE_BYTES``. A
    compressed body decodes while data is at hand, with no wait for the socket between pieces,
    and one read may hold much: the loop is let go every ``YIELD_BYTES`` and whenever ``TURN_S``
    has passed since it was last let go (a 1 MB gzip of a 256 MiB event stream held it for 7 s)."""
    since = 0
    turn = time.perf_counter()
    try:
        async for chunk in response.content.iter_any():
            for piece in _slices(chunk):
                yield piece
                since += len(piece)
                if since >= YIELD_BYTES or time.perf_counter() - turn >= TURN_S:
                    since = 0
                    await asyncio.sleep(0)
                    turn = time.perf_counter()
    except TimeoutError:
        raise UpstreamTimeout(f"Upstream {name} timed out mid-stream") from None
    except CONNECTION_ERRORS as exc:
        raise unreachable(name, "broke off mid-stream", exc) from None


def _slices(chunk: bytes) -> Iterable[bytes]:
    if len(chunk) <= SLICE_BYTES:
        return (chunk,)
    view = memoryview(chunk)
    return (bytes(view[i : i + SLICE_BYTES]) for i in range(0, len(chunk), SLICE_BYTES))


def undecodable_answer(name: str) -> UpstreamFailed:
    return UpstreamFailed(
        f"Upstream {name} answered in a Content-Encoding the proxy cannot decode "
        "(it asks for identity)."
    )


def undecodable(exc: BaseException) -> bool:
    """aiohttp's failure for an answer in a coding it cannot decode (br or zstd without their
    modules), raised with the head: an answer the upstream gave, not a network failure."""
    return isinstance(exc, aiohttp.ClientResponseError) and "content-encoding" in exc.message


def unreachable(name: str, what: str, exc: BaseException) -> UpstreamUnreachable:
    """The client's error names the upstream as configured and the kind of failure; the
    exception's text (aiohttp's names the host and port, e.g. "Cannot connect to host
    10.0.0.5:8000") goes to the server log only."""
    kind = type(exc).__name__
    log.warning("upstream %s %s: %s: %s", name, what, kind, redact_text(str(exc)))
    return UpstreamUnreachable(f"Upstream {name} {what} ({kind}).")


def closer(response: aiohttp.ClientResponse) -> Callable[[], Coroutine[Any, Any, None]]:
    """``close`` for a streamed response: a body read to its end leaves its connection in the
    pool; one left unfinished (the client went away) closes it, so the upstream stops generating."""

    async def close() -> None:
        if response.content.at_eof():
            response.release()
        else:
            response.close()

    return close
