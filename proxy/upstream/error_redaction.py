"""What a client is told of an upstream's error, redacted as the log row is (``rules.redact``):
an upstream may quote back the key it was sent, and in ``auth.mode: keys`` (or with any
``api_key_env``) that is the server's own key, not the client's.

Redacted: an error answer's body (status >= 400; JSON has its strings redacted and is written back
only when something changed, anything else is redacted as text; past 32 K characters of text,
the rest is cut), the error events of a relayed
event stream (what ``error_events`` calls one: what the request's log row records as the
provider's error), and the message of a ``ProxyError`` raised
mid-stream (litellm's, built from the provider's exception text). Besides the redactor's key
shapes, the exact values of every upstream's ``api_key_env`` (read once, when the app starts)
and of the credential the request itself sent upstream (a client's own key, in passthrough)
go, with any run of text sharing 8 characters with one of them, or masked like one
(``sk-proj-****cdef``, ``mysec...y123``), unless the request itself said that run: the client's
own words quoted back are never redacted for a likeness to a secret (that told it which of its
guesses were one, a character a request).

A success answer is never parsed or changed: a whole one is relayed as it came (but a whole event
stream, an upstream's answer to a request that asked for none, has its error events redacted as a
stream's are); in a stream each chunk is searched for the bytes ``error`` and, only where they
occur, that event is held back until its head tells whether it is an error event (almost always
within the same chunk), then relayed as it came unless it is one."""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import orjson

from proxy.errors import ProxyError
from proxy.settings import UpstreamSettings
from proxy.upstream import UpstreamResponse
from proxy.upstream.account_headers import without_account_headers
from proxy.upstream.error_events import ERROR_START, error_event
from proxy.upstream.error_scan import EventScanner
from proxy.upstream.error_text import EVENT_CHARS, SHORT, as_text, decoded, error_only, short_chars
from proxy.upstream.key_filter import stream_without_keys, without_keys
from rules.redact import (
    MIN_SECRET_CHARS,
    PREFIX_MARGIN,
    REDACTED,
    redact,
    redact_text,
    redacted_prefix,
)
from rules.redact_known import own_words

# the headers a credential goes upstream in (OpenAI's, Azure's, Anthropic's, Google's)
_CREDENTIAL_HEADERS = ("authorization", "api-key", "x-api-key", "x-goog-api-key")
_GRAM = 8  # characters a run of text must share with a configured key to be taken for part of it
_SHOWN = 4  # characters of a key's start or end beside a mask that make it recognisable
_RUN = re.compile(r"[A-Za-z0-9_\-+/=.~*\u2026\u2022]{5,}")
_MASK = re.compile(r"\*{2,}|\.{2,}|\u2026+|\u2022+")
# Characters of an error's text a client is shown (all its strings together): an upstream quoting
# the request back in its 400 (a validation error's input) had a MiB redacted on the event loop,
# 4 s of it for text dense in secrets' names; the rest is cut, redacted before the cut.
_SHOWN_CHARS = 32 * 1024
# An error event of a stream (``error_text.EVENT_CHARS``), each one (a stream may carry many:
# each is redacted on the loop, up to ~3 µs a character of text dense in secrets' names; one of
# many members is reduced to its error's type, code and message first), and a relayed header's
# value: legit ones are a line or two. Past these they are cut, or, for a header, not relayed.
_HEADER_CHARS = 1024
_HEADERS_CHARS = 8 * 1024  # of all relayed header values together
_FRAMING = frozenset(("content-type", "content-encoding", "content-length", "transfer-encoding"))
_UNREADABLE = orjson.dumps(
    {
        "error": {
            "message": "The upstream's error answer came encoded in a way the proxy does not "
            "read, so it is not shown.",
            "type": "upstream_error",
            "param": None,
            "code": "upstream_error",
        }
    }
)
# Streams
_ARRAY_SEPARATORS = b"[, \t\r\n"  # around a JSON-array stream's element
_ARRAY_CLOSING = b"] \t\r\n"


class ErrorRedactor:
    """Redacts upstream errors; ``keys``: the server-side key values (those shorter than
    ``MIN_SECRET_CHARS`` are placeholders such as ``none``, not secrets, and are left out)."""

    def __init__(
        self, keys: Iterable[str] = (), sent: Any = None, server: tuple[bytes, ...] | None = None
    ) -> None:
        kept = sorted({k for k in keys if len(k) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        self.keys = tuple(kept)
        # the server's own keys (``keys`` unless a request's credentials were added): never in
        # anything relayed, success answers included (``key_filter``)
        self.server = tuple(k.encode() for k in kept) if server is None else server
        # what the request said (its body: parsed, or its bytes); a run of its own text quoted
        # back is not taken for a part of a key (``_said``)
        self.sent = sent
        self._sent_text: str | None = None

    def _to_client(self) -> contextlib.AbstractContextManager[None]:
        """The server's secrets' quoted starts too are judged by ``_said`` (``own_words``)."""
        return own_words(self._said) if self.sent is not None else contextlib.nullcontext()

    def _said(self, run: str) -> bool:
        """Whether ``run`` is the request's own text. A run sharing 8 characters with a key, or
        a key's 4 first or last beside a mask, redacted when the request itself said it, told
        the client which of its guesses are part of the server's key: an upstream quoting the
        request in its error (an unknown model, field or tag) gave the key away, a character a
        request. The body is read as JSON, so escapes in its bytes hide nothing."""
        if self.sent is None:
            return False
        if self._sent_text is None:
            self._sent_text = as_text(self.sent)
        return run in self._sent_text

    @functools.cached_property
    def _grams(self) -> frozenset[str]:
        """Every run of ``_GRAM`` characters of a key (made when an error is first redacted)."""
        return frozenset(k[i : i + _GRAM] for k in self.keys for i in range(len(k) - _GRAM + 1))

    def with_credentials(
        self, headers: Mapping[str, str], key: str | None, sent: Any = None
    ) -> ErrorRedactor:
        """This redactor for one request: also knowing the credential it sent upstream (``key``,
        and the credential headers of ``headers``: an upstream quoting back a client's own key,
        a gateway's key of no known shape, had it relayed and logged), and what it said
        (``sent``: its body, parsed or as bytes)."""
        credentials = [key] if key else []
        for name in _CREDENTIAL_HEADERS:
            value = headers.get(name)
            if value:
                credentials.append(value[7:] if value[:7].lower() == "bearer " else value)
        fresh = {k.strip() for k in credentials if len(k.strip()) >= MIN_SECRET_CHARS}
        return ErrorRedactor((*self.keys, *(fresh - set(self.keys))), sent, self.server)

    @classmethod
    def for_upstreams(cls, upstreams: Iterable[UpstreamSettings]) -> ErrorRedactor:
        """The keys the upstreams are sent: their ``api_key_env`` values, read now, stripped as
        ``openai.upstream_api_key`` strips them."""
        names = {u.api_key_env for u in upstreams if u.api_key_env}
        return cls(os.environ.get(name, "").strip() for name in sorted(names))

    def text(self, text: str, shown: int = _SHOWN_CHARS) -> str:
        if len(text) > shown:
            return self._cut(text, shown)
        with self._to_client():
            return redact_text(self._without_keys(text))

    def _cut(self, text: str, keep: int) -> str:
        """``text``'s first ``keep`` characters redacted, read past the cut (a secret it would
        split is not kept in part), and an ellipsis."""
        window = self._without_keys(text[: keep + 4 * PREFIX_MARGIN])
        with self._to_client():
            return redacted_prefix(window, keep) + "\u2026"

    def _clipped(self, value: Any, shown: int = _SHOWN_CHARS) -> Any:
        """``value`` with its long strings cut once ``_SHOWN_CHARS`` characters were kept, in
        order; its short ones (a type, a code) kept whole, unless there are so many of them
        that they share the cut."""
        short = short_chars(value)
        spare = short <= shown // 2
        return self._cut_strings(value, [shown - short if spare else shown], spare)

    def _cut_strings(self, value: Any, budget: list[int], spare: bool) -> Any:
        if isinstance(value, str):
            if spare and len(value) <= SHORT:
                return value
            keep = budget[0]
            budget[0] = max(0, keep - len(value))
            return value if len(value) <= keep else self._cut(value, keep)
        if isinstance(value, dict):
            return {k: self._cut_strings(v, budget, spare) for k, v in value.items()}
        if isinstance(value, list):
            return [self._cut_strings(v, budget, spare) for v in value]
        return value

    def value(self, value: Any) -> Any:
        """A JSON-like value with secret-named fields and secrets in strings redacted."""
        with self._to_client():
            return redact(self._keys_in(value) if self.keys else value)

    def body(self, body: bytes, shown: int = _SHOWN_CHARS) -> bytes:
        """An error body: JSON redacted in its strings (the same bytes when nothing changed),
        anything else as text."""
        try:
            value = orjson.loads(body)
            if len(body) > shown:
                value = self._clipped(value, shown)
                return orjson.dumps(self.value(value))
            redacted = self.value(value)
            return body if redacted == value else orjson.dumps(redacted)
        except (orjson.JSONDecodeError, orjson.JSONEncodeError, RecursionError):
            return self._text_bytes(body, shown)

    def error(self, error: ProxyError) -> ProxyError:
        error.message = self.text(error.message)
        error.args = (error.message,)
        return error

    def response(self, response: UpstreamResponse, gateway: bool = False) -> UpstreamResponse:
        """``response`` as the client may see it: an error body redacted, a stream's error
        events redacted as they pass; a success body untouched. ``gateway``: the upstream was
        sent the server's key, so the account headers and rate-limit counters are the gateway's,
        not relayed."""
        if gateway:
            without_account_headers(response.headers)
        self.headers(response.headers)
        if response.status >= 400 and response.body is not None:
            response.body = self._error_body(response.body, response.headers)
        elif response.body is not None:
            response.body = self._success_body(response.body, response.headers)
        if response.chunks is not None and response.json_array:
            response.chunks = self.elements(response.chunks)
        elif response.chunks is not None and not response.extra.get("passthrough"):
            response.chunks = self.stream(response.chunks)
        if response.chunks is not None and self.server:
            response.chunks = stream_without_keys(response.chunks, self.server)
        error = response.extra.get("error")
        if isinstance(error, ProxyError):
            self.error(error)
        return response

    def headers(self, headers: dict[str, str]) -> None:
        """Relayed headers redacted in place, each long enough to hold a secret: a gateway
        echoing the credential it was sent (``openai-debug-authorization: Bearer …``) had the
        server's key relayed to the client. A value over ``_HEADER_CHARS``, and those past
        ``_HEADERS_CHARS`` in all, are not relayed: an upstream sending 128 headers of 64 KiB
        held the loop 20 s while they were redacted."""
        total = 0
        for name, value in list(headers.items()):
            if name in _FRAMING:
                continue  # the body's own: never a secret, never dropped
            total += len(value)
            if len(value) > _HEADER_CHARS or total > _HEADERS_CHARS:
                del headers[name]
                total -= len(value)
            elif len(value) >= MIN_SECRET_CHARS:
                with self._to_client():
                    clean = redact_text(self._without_keys(value))
                if clean != value:
                    headers[name] = clean

    async def stream(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """``chunks`` relayed with their error events redacted; a ``ProxyError`` raised by them
        (the upstream broke off) comes out with its message redacted."""
        scan = EventScanner(self)
        try:
            async for chunk in chunks:
                out = scan.feed(chunk)
                if out:
                    yield out
        except ProxyError as exc:
            rest = scan.finish()
            if rest:
                yield rest
            raise self.error(exc) from None
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()
        rest = scan.finish()
        if rest:
            yield rest

    async def elements(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """A JSON-array stream's pieces (each one element with its separators,
        ``proxy.upstream.json_array_stream``), an error element redacted; a ``ProxyError`` raised
        by them comes out with its message redacted."""
        try:
            async for piece in chunks:
                start = len(piece) - len(piece.lstrip(_ARRAY_SEPARATORS))
                end = len(piece.rstrip(_ARRAY_CLOSING))
                if ERROR_START.match(piece, start) is None and not _error_element(piece[start:end]):
                    yield piece
                    continue
                yield piece[:start] + self.body(piece[start:end], EVENT_CHARS) + piece[end:]
        except ProxyError as exc:
            raise self.error(exc) from None
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()

    def event(self, event: bytes, whole: bool) -> bytes:
        """An error event; ``whole``: from its first byte (else its start was relayed already,
        and the rest is redacted as text)."""
        if not whole:
            return self._text_bytes(event, EVENT_CHARS)
        lines = event.split(b"\n")
        for i, line in enumerate(lines):
            if line.startswith(b"data:"):
                cr = b"\r" if line.endswith(b"\r") else b""
                payload = line[5 : len(line) - len(cr)]
                lead = b" " if payload.startswith(b" ") else b""
                data = payload[len(lead) :]
                if len(data) > 4 * EVENT_CHARS:  # the structure too: a MiB of tiny strings
                    data = error_only(data)
                lines[i] = b"data:" + lead + self.body(data, EVENT_CHARS) + cr
            else:
                lines[i] = self._text_bytes(line, EVENT_CHARS)
        return b"\n".join(lines)

    def _error_body(self, body: bytes, headers: dict[str, str]) -> bytes:
        encoding = headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):  # asked for identity, an upstream may still encode
            del headers["content-encoding"]
            plain = decoded(body, encoding)
            if plain is None:
                return _UNREADABLE
            body = plain
        return self.body(body)

    def _success_body(self, body: bytes, headers: dict[str, str]) -> bytes:
        """A whole success answer that is an event stream (an upstream answering a request that
        asked for none with one): its error events redacted as a relayed stream's are. Any other
        is relayed as it came, but for the server's own keys (``key_filter``: a gateway's 200
        quoting one in an error object)."""
        if headers.get("content-encoding", "").strip().lower() not in ("", "identity"):
            return body  # not read (the transport decodes what it can)
        if "text/event-stream" in headers.get("content-type", "").lower():
            scan = EventScanner(self)  # a glance at a body holding no "error"
            body = scan.feed(body) + scan.finish()
        return without_keys(body, self.server) if self.server else body

    def _text_bytes(self, data: bytes, shown: int = _SHOWN_CHARS) -> bytes:
        # surrogateescape: bytes that are not UTF-8 (a chunk cut inside a character) go back as
        # they came
        text = data.decode("utf-8", "surrogateescape")
        redacted = self.text(text, shown)
        return data if redacted == text else redacted.encode("utf-8", "surrogateescape")

    def _without_keys(self, text: str) -> str:
        if not self.keys:
            return text
        for key in self.keys:
            if key in text:
                text = text.replace(key, REDACTED)
        return _RUN.sub(self._fragment, text)

    def _fragment(self, match: re.Match[str]) -> str:
        """A run of key characters: redacted when it holds 8 characters of a key, or shows a
        key's first or last 4 characters beside a mask."""
        run = match[0]
        # a sentence's full stop is not part of it ("provided: sk-….")
        stop = "." if run.endswith(".") and not run.endswith("..") else ""
        run = run[: len(run) - len(stop)]
        grams = self._grams
        if any(run[i : i + _GRAM] in grams for i in range(len(run) - _GRAM + 1)):
            return match[0] if self._said(run) else REDACTED + stop
        pieces = _MASK.split(run)
        if len(pieces) > 1:
            first, last = pieces[0], pieces[-1]
            for key in self.keys:
                if (len(first) >= _SHOWN and key.startswith(first)) or (
                    len(last) >= _SHOWN and key.endswith(last)
                ):
                    return match[0] if self._said(run) else REDACTED + stop
        return match[0]

    def _keys_in(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._without_keys(value)
        if isinstance(value, dict):
            return {k: self._keys_in(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._keys_in(v) for v in value]
        return value


def _error_element(element: bytes) -> bool:
    """Whether a JSON-array stream's element is an error with its ``error`` member after
    others (not at its start, ``ERROR_START``): read whole, where it holds the word."""
    if b'"error"' not in element:
        return False
    try:
        value = orjson.loads(element)
    except orjson.JSONDecodeError:
        return False
    return isinstance(value, dict) and error_event(value) is not None
