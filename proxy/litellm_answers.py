"""What litellm's HTTP client reads of an upstream's answer, bounded as the native relays bound
it (``proxy.upstream.transport``): litellm's own client read a whole answer, and inflated a
compressed one, with no limit, on the event loop (a 2 MB gzip answer of 2 GiB held 8 GB and
the loop 30 s; a stream line that never ended grew to 5 GB), whatever the other tenants waited
for. Each answer is asked for uncompressed; one compressed all the same is inflated here, a
piece at a time, the loop let go between pieces; a whole answer past ``MAX_ANSWER_BYTES``, or an
event stream's line past ``MAX_LINE_BYTES``, breaks off as a failed read (the client is told
the upstream failed, 502); so does a whole answer to a request for a stream. An event stream's
lines that carry no event (comments, ``retry:``, an empty ``data:``) are taken off, which
litellm's readers took for broken events (``proxy.sse_lines``). A redirect is never
followed, as the native relays follow none: its ``Location`` is taken off, so the client is told
of the 3xx (litellm's clients followed it, with the server's ``x-api-key`` and the body, to
whatever host it named).

Wraps litellm's aiohttp transport (its production one) and the httpx transports it makes instead
(``DISABLE_AIOHTTP_TRANSPORT``, ``LITELLM_HTTP2``, an environment's proxy: each made of a
subclass bounded alike, so litellm's own type checks still hold); installed once, when litellm
is first imported (``proxy.providers.load_litellm``). litellm is pinned by the lock, and
``tests/proxy/upstream/test_litellm_answer_bounds.py`` fails if a release moves what this
wraps."""

from __future__ import annotations

import asyncio
import re
import zlib
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any

import httpx
import orjson

from proxy.sse_lines import SseLines

# A whole answer litellm parses on the loop: a model's is a few MB at most (128 K tokens of
# output, with log-probabilities); the native relays, which parse none, pass up to 64 MiB
MAX_ANSWER_BYTES = 16 * 1024 * 1024
MAX_LINE_BYTES = 16 * 1024 * 1024  # of one line of an event stream
_PIECE = 1 << 20  # inflated at a time
_INFLATED = {"gzip": 47, "x-gzip": 47, "deflate": 47}  # zlib's wbits: a gzip or zlib header
_INSTALLED = "_ctxproxy_bounded"
_CODING = re.compile(r"[A-Za-z0-9._+-]{1,32}")  # a content coding's name, as one is told


class RefusedAnswer(httpx.RemoteProtocolError):
    """An answer the upstream did send, refused here: not a connection that failed (the client
    is told the answer could not be read, not that the upstream could not be reached)."""


def install() -> None:
    from litellm.llms.custom_httpx.aiohttp_transport import LiteLLMAiohttpTransport
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    original = LiteLLMAiohttpTransport.handle_async_request
    if getattr(original, _INSTALLED, False):
        return
    LiteLLMAiohttpTransport.handle_async_request = _bounded(original)  # type: ignore[method-assign]
    made: Any = AsyncHTTPHandler._create_httpx_transport
    mounted: Any = AsyncHTTPHandler.create_httpx_proxy_mounts

    def create_httpx_transport(*args: Any, **kwargs: Any) -> Any:
        transport = made(*args, **kwargs)
        if transport is None:  # httpx's default, which httpx would make itself: made here
            kept = {k: v for k, v in kwargs.items() if k in ("verify", "cert", "limits")}
            transport = httpx.AsyncHTTPTransport(**kept)
        return _bounded_transport(transport)

    def create_httpx_proxy_mounts(*args: Any, **kwargs: Any) -> Any:
        mounts = mounted(*args, **kwargs)
        if isinstance(mounts, Mapping):  # litellm's is read-only (a MappingProxyType)
            mounts = {k: _bounded_transport(v) for k, v in mounts.items()}
        return mounts

    AsyncHTTPHandler._create_httpx_transport = staticmethod(create_httpx_transport)  # type: ignore[method-assign]
    AsyncHTTPHandler.create_httpx_proxy_mounts = staticmethod(create_httpx_proxy_mounts)  # type: ignore[method-assign]


def _bounded_transport(transport: Any) -> Any:
    if transport is not None and not getattr(transport.handle_async_request, _INSTALLED, False):
        transport.__class__ = _bounded_class(type(transport))
    return transport


_BOUNDED_CLASSES: dict[type, type] = {}


def _bounded_class(cls: type) -> type:
    """A subclass of transport class ``cls`` whose answers are bounded."""
    bounded = _BOUNDED_CLASSES.get(cls)
    if bounded is None:
        handle = _bounded(cls.handle_async_request)  # type: ignore[attr-defined]
        bounded = type(f"Bounded{cls.__name__}", (cls,), {"handle_async_request": handle})
        _BOUNDED_CLASSES[cls] = bounded
    return bounded


def _bounded(
    original: Callable[[Any, httpx.Request], Coroutine[Any, Any, httpx.Response]],
) -> Callable[[Any, httpx.Request], Coroutine[Any, Any, httpx.Response]]:
    async def handle(transport: Any, request: httpx.Request) -> httpx.Response:
        request.headers["accept-encoding"] = "identity"
        response = await original(transport, request)
        if 300 <= response.status_code < 400:
            response.headers.pop("location", None)  # no redirect to follow: it carries the key
        said = response.headers.get("content-encoding", "").strip()
        encoding = said.lower()
        wbits = None
        if encoding not in ("", "identity"):
            wbits = _INFLATED.get(encoding)
            if wbits is None:
                await response.aclose()
                raise RefusedAnswer(f"it came {_coding(said)}, which is not read")
            del response.headers["content-encoding"]  # inflated here, not by httpx
        kind = response.headers.get("content-type", "").lower()  # a media type's case is none
        streamed = "text/event-stream" in kind
        if (
            response.status_code == 200
            and kind.startswith("application/json")
            and _asks_stream(request)
        ):
            # a stream asked for, a whole answer given: litellm read no event of it and made an
            # empty, finished answer of it (the upstream's fault hidden as a success)
            await response.aclose()
            raise RefusedAnswer("a whole answer to a request for a stream")
        response.stream = _BoundedStream(response.stream, streamed, wbits)
        return response

    setattr(handle, _INSTALLED, True)
    return handle


def _coding(said: str) -> str:
    """The upstream's coding as the client is told it: named as written (a key in it is
    redacted as it would be anywhere; lowered, it was not) if it has a coding's shape, else not
    at all (the header is the upstream's to write: any length, any text)."""
    return f"{said!r}-encoded" if _CODING.fullmatch(said) else "in a coding of no known name"


def _asks_stream(request: httpx.Request) -> bool:
    """Whether the request asks for a stream: Gemini's ``alt=sse``, or its JSON body's own
    ``stream`` is true. The body parsed only when the bytes name one (``"stream": true`` at any
    depth but inside a string, whose quotes would be escaped): a tool's schema may hold a
    property so named."""
    if request.url.params.get("alt") == "sse":
        return True
    try:
        content = request.content
    except httpx.RequestNotRead:
        return False
    if b'"stream": true' not in content and b'"stream":true' not in content:
        return False
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError:
        return False
    return isinstance(body, dict) and body.get("stream") is True


class _BoundedStream(httpx.AsyncByteStream):
    def __init__(self, inner: Any, streamed: bool, wbits: int | None) -> None:
        self._inner = inner
        self._streamed = streamed
        self._inflate = zlib.decompressobj(wbits) if wbits is not None else None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = line = 0
        lines = SseLines() if self._streamed else None
        async for raw in self._inner:
            async for piece in self._read(raw):
                total += len(piece)
                if lines is not None:
                    end = piece.rfind(b"\n")
                    line = len(piece) - end - 1 if end >= 0 else line + len(piece)
                    if line > MAX_LINE_BYTES:
                        raise httpx.RemoteProtocolError(
                            f"an event of the upstream's stream runs past {MAX_LINE_BYTES} bytes"
                        )
                    piece = lines.feed(piece)  # what litellm's readers could not take, left out
                    if not piece:
                        continue
                elif total > MAX_ANSWER_BYTES:
                    raise httpx.RemoteProtocolError(
                        f"the upstream's answer runs past {MAX_ANSWER_BYTES} bytes"
                    )
                yield piece
        rest = lines.end() if lines is not None else b""
        if rest:
            yield rest

    async def _read(self, raw: bytes) -> AsyncIterator[bytes]:
        """``raw`` as it reads: inflated a piece at a time, each checked before the next is
        made, the loop let go between them."""
        inflate = self._inflate
        if inflate is None:
            yield raw
            return
        data = raw
        while True:
            piece = inflate.decompress(data, _PIECE)
            if piece:
                yield piece
            data = inflate.unconsumed_tail
            if not data:
                return
            await asyncio.sleep(0)

    async def aclose(self) -> None:
        await self._inner.aclose()
