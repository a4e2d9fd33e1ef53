"""What a client is told of an upstream's error, redacted as the log row is (``rules.redact``):
an upstream may quote back the key it was sent, and in ``auth.mode: keys`` (or with any
``api_key_env``) that is the server's own key, not the client's.

Redacted: an error answer's body (status >= 400; JSON has its strings redacted and is written back
only when something changed, anything else is redacted as text), the error events of a relayed
event stream (what ``error_events`` calls one: what the request's log row records as the
provider's error), and the message of a ``ProxyError`` raised
mid-stream (litellm's, built from the provider's exception text). Besides the redactor's key
shapes, the exact values of every upstream's ``api_key_env`` (read once, when the app starts)
go, with any run of text sharing 8 characters with one of them, or masked like one
(``sk-proj-****cdef``, ``mysec...y123``).

A success answer is never parsed or changed: a whole one is relayed as it came; in a stream each
chunk is searched for the bytes ``error`` and, only where they occur, that event is held back until
its head tells whether it is an error event (almost always within the same chunk), then relayed
as it came unless it is one."""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import orjson

from proxy.errors import ProxyError
from proxy.settings import UpstreamSettings
from proxy.upstream import UpstreamResponse
from proxy.upstream.error_events import ERROR_START, HEAD_BYTES, is_error_head
from rules.redact import MIN_SECRET_CHARS, REDACTED, redact, redact_text

_GRAM = 8  # characters a run of text must share with a configured key to be taken for part of it
_SHOWN = 4  # characters of a key's start or end beside a mask that make it recognisable
_RUN = re.compile(r"[A-Za-z0-9_\-+/=.~*\u2026\u2022]{5,}")
_MASK = re.compile(r"\*{2,}|\.{2,}|\u2026+|\u2022+")
_MAX_DECODED = 1 << 20  # an encoded error body is read up to this size
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
_MARK = b"error"
_KEEP = len(_MARK) - 1  # bytes kept of the last relayed chunk: a mark may straddle two chunks
_HEAD = HEAD_BYTES  # bytes of an event's start that tell whether it is an error event
_MAX_HELD = 1 << 20  # an error event longer than this is redacted as text in pieces
_ARRAY_SEPARATORS = b"[, \t\r\n"  # around a JSON-array stream's element
_ARRAY_CLOSING = b"] \t\r\n"
_ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")  # a blank line ends an event (LF, CRLF or CR)


class ErrorRedactor:
    """Redacts upstream errors; ``keys``: the server-side key values (those shorter than
    ``MIN_SECRET_CHARS`` are placeholders such as ``none``, not secrets, and are left out)."""

    def __init__(self, keys: Iterable[str] = ()) -> None:
        kept = sorted({k for k in keys if len(k) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        self.keys = tuple(kept)
        self._grams = frozenset(k[i : i + _GRAM] for k in kept for i in range(len(k) - _GRAM + 1))

    @classmethod
    def for_upstreams(cls, upstreams: Iterable[UpstreamSettings]) -> ErrorRedactor:
        """The keys the upstreams are sent: their ``api_key_env`` values, read now, stripped as
        ``openai.upstream_api_key`` strips them."""
        names = {u.api_key_env for u in upstreams if u.api_key_env}
        return cls(os.environ.get(name, "").strip() for name in sorted(names))

    def text(self, text: str) -> str:
        return redact_text(self._without_keys(text))

    def value(self, value: Any) -> Any:
        """A JSON-like value with secret-named fields and secrets in strings redacted."""
        return redact(self._keys_in(value) if self.keys else value)

    def body(self, body: bytes) -> bytes:
        """An error body: JSON redacted in its strings (the same bytes when nothing changed),
        anything else as text."""
        try:
            value = orjson.loads(body)
            redacted = self.value(value)
            return body if redacted == value else orjson.dumps(redacted)
        except (orjson.JSONDecodeError, orjson.JSONEncodeError, RecursionError):
            return self._text_bytes(body)

    def error(self, error: ProxyError) -> ProxyError:
        error.message = self.text(error.message)
        error.args = (error.message,)
        return error

    def response(self, response: UpstreamResponse) -> UpstreamResponse:
        """``response`` as the client may see it: an error body redacted, a stream's error
        events redacted as they pass; a success body untouched."""
        if response.status >= 400 and response.body is not None:
            response.body = self._error_body(response.body, response.headers)
        if response.chunks is not None and response.json_array:
            response.chunks = self.elements(response.chunks)
        elif response.chunks is not None:
            response.chunks = self.stream(response.chunks)
        error = response.extra.get("error")
        if isinstance(error, ProxyError):
            self.error(error)
        return response

    async def stream(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """``chunks`` relayed with their error events redacted; a ``ProxyError`` raised by them
        (the upstream broke off) comes out with its message redacted."""
        scan = _EventScanner(self)
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
                if ERROR_START.match(piece, start) is None:
                    yield piece
                    continue
                end = len(piece.rstrip(_ARRAY_CLOSING))
                yield piece[:start] + self.body(piece[start:end]) + piece[end:]
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
            return self._text_bytes(event)
        lines = event.split(b"\n")
        for i, line in enumerate(lines):
            if line.startswith(b"data:"):
                cr = b"\r" if line.endswith(b"\r") else b""
                payload = line[5 : len(line) - len(cr)]
                lead = b" " if payload.startswith(b" ") else b""
                lines[i] = b"data:" + lead + self.body(payload[len(lead) :]) + cr
            else:
                lines[i] = self._text_bytes(line)
        return b"\n".join(lines)

    def _error_body(self, body: bytes, headers: dict[str, str]) -> bytes:
        encoding = headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):  # asked for identity, an upstream may still encode
            del headers["content-encoding"]
            decoded = _decoded(body, encoding)
            if decoded is None:
                return _UNREADABLE
            body = decoded
        return self.body(body)

    def _text_bytes(self, data: bytes) -> bytes:
        # surrogateescape: bytes that are not UTF-8 (a chunk cut inside a character) go back as
        # they came
        text = data.decode("utf-8", "surrogateescape")
        redacted = self.text(text)
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
            return REDACTED + stop
        pieces = _MASK.split(run)
        if len(pieces) > 1:
            first, last = pieces[0], pieces[-1]
            for key in self.keys:
                if (len(first) >= _SHOWN and key.startswith(first)) or (
                    len(last) >= _SHOWN and key.endswith(last)
                ):
                    return REDACTED + stop
        return match[0]

    def _keys_in(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._without_keys(value)
        if isinstance(value, dict):
            return {k: self._keys_in(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._keys_in(v) for v in value]
        return value


def _decoded(body: bytes, encoding: str) -> bytes | None:
    """A gzip or deflate body decoded (at most ``_MAX_DECODED`` bytes), else None."""
    wbits = {"gzip": 31, "x-gzip": 31, "deflate": 15}.get(encoding)
    if wbits is None:
        return None
    try:
        decoder = zlib.decompressobj(wbits)
        out = decoder.decompress(body, _MAX_DECODED)
    except zlib.error:
        return None
    return None if decoder.unconsumed_tail else out


def last_event_end(data: bytes, limit: int, ends: tuple[bytes, ...] = _ENDS) -> int:
    """Just after the last blank line inside ``data[:limit]``, or -1. ``ends``: the ways of
    ending one, the stream's own first; each next one is looked for only after the best found
    so far, so a way the stream does not use is not searched for through all of it, once for
    every event."""
    best = -1
    for end in ends:
        i = data.rfind(end, 0 if best < 0 else max(0, best - len(end) + 1), limit)
        if i >= 0 and i + len(end) > best:
            best = i + len(end)
    return best


def _first_end(data: bytes, start: int, ends: tuple[bytes, ...] = _ENDS) -> int:
    """Just after the first blank line ending in ``data[start:]``, or -1 (``ends`` as for
    ``last_event_end``: each next one looked for only before the best found so far)."""
    best = -1
    for end in ends:
        i = data.find(end, start) if best < 0 else data.find(end, start, best - 1)
        if i >= 0:
            best = i + len(end)
    return best


def _ends_first(found: bytes) -> tuple[bytes, ...]:
    """The ways of ending an event, the one ``found`` ends with first."""
    own = next((e for e in _ENDS if found.endswith(e)), _ENDS[0])
    return (own, *(e for e in _ENDS if e != own))


class _EventScanner:
    """Relays an event stream's bytes, holding back only an event whose bytes hold ``error``
    until its head says what it is, and redacting it if it is an error event."""

    def __init__(self, redactor: ErrorRedactor) -> None:
        self.redactor = redactor
        self.sent = b""  # the open event's first bytes, relayed already (at most _HEAD)
        self.tail = b""  # the last bytes relayed (a mark or a blank line may straddle chunks)
        self.held = b""  # the open event's bytes held back
        self.error = False  # the held event is an error event
        self.cut = False  # part of it was redacted and relayed already (it is that long)
        self.searched = 0  # how far the held event was searched for its end
        self.ends: tuple[bytes, ...] = _ENDS  # the ways of ending an event, its own first

    def feed(self, chunk: bytes) -> bytes:
        if not (self.held or self.error or _MARK in chunk or self._straddles(chunk)):
            self._note(chunk)  # the common case: relayed as it came
            return chunk
        out: list[bytes] = []
        pos = 0  # where the chunk's bytes not yet relayed or held start (an event's start)
        while pos < len(chunk):
            if self.held or self.error:
                self.held += chunk[pos:] if pos else chunk
                chunk, pos = self._settle(out), 0
                continue
            # a mark straddling the two chunks first: a later one would let this chunk's start by
            at = 0 if not pos and self._straddles(chunk) else chunk.find(_MARK, pos)
            if at < 0:
                self._relay(chunk[pos:] if pos else chunk, out)
                break
            # at ``pos`` an event starts (one ended there, or the stream starts): the one holding
            # the mark starts there or later
            if pos or self._between_events():
                start = max(pos, last_event_end(chunk, at, self.ends))
            else:
                start = self._event_start(chunk, at)
            if start > pos:
                self._relay(chunk[pos:start], out)
            if start >= 0 and (end := self._relayed_whole(chunk, start, out)) >= 0:
                pos = end  # no error event: decided within the chunk, nothing held or copied
                continue
            self.held, self.searched = chunk[max(start, 0) :], 0
            chunk, pos = self._settle(out), 0
        return b"".join(out)

    def _relayed_whole(self, chunk: bytes, start: int, out: list[bytes]) -> int:
        """The event starting at ``chunk[start]`` relayed when it ends within the chunk and its
        head says it is no error event: where it ends; else -1 (it is held)."""
        end = _first_end(chunk, start, self.ends)
        if end < 0 or is_error_head(chunk[start : start + _HEAD]) is not False:
            return -1
        if not chunk.startswith(self.ends[0], end - len(self.ends[0])):
            self.ends = _ends_first(chunk[max(start, end - 4) : end])
        self._relay(chunk[start:end], out)
        return end

    def finish(self) -> bytes:
        """What is held when the stream ends (an unfinished event)."""
        out: list[bytes] = []
        if self.held:
            if self.error or is_error_head(self._head(), final=True):
                out.append(self.redactor.event(self.held, whole=not (self.sent or self.cut)))
            else:
                out.append(self.held)
            self.held = b""
        return b"".join(out)

    def _head(self) -> bytes:
        return (self.sent + self.held[:_HEAD])[:_HEAD]

    def _event_start(self, data: bytes, limit: int) -> int:
        """Where the event holding ``data[limit]`` starts in ``data``; -1: before it."""
        end = last_event_end(data, limit, self.ends)
        if end < 0 and self.tail:  # a blank line across the two chunks
            joint = self.tail + data[: min(limit, _KEEP)]
            found = last_event_end(joint, len(joint))
            if found > len(self.tail):
                end = found - len(self.tail)
        return end

    def _between_events(self) -> bool:
        """Whether the bytes relayed so far end an event (or there are none)."""
        return not self.tail or any(self.tail.endswith(end) for end in self.ends)

    def _straddles(self, chunk: bytes) -> bool:
        """Whether a mark begins in the last chunk and ends in ``chunk``."""
        return bool(self.tail) and _MARK in self.tail + chunk[:_KEEP]

    def _relay(self, data: bytes, out: list[bytes]) -> None:
        out.append(data)
        self._note(data)

    def _note(self, data: bytes) -> None:
        """Keep what the next chunks need of ``data``, relayed: its open event's head, its tail."""
        if data.endswith(b"\n\n"):  # a chunk per event (most upstreams)
            self.sent = b""
        else:
            end = self._event_start(data, len(data))
            if end >= 0:
                self.sent = data[end : end + _HEAD]
            elif len(self.sent) < _HEAD:
                self.sent += data[: _HEAD - len(self.sent)]
        self.tail = data[-_KEEP:] if len(data) >= _KEEP else (self.tail + data)[-_KEEP:]

    def _settle(self, out: list[bytes]) -> bytes:
        """Decide on the held event as far as its bytes allow; returns the bytes after it (the
        next events), to be scanned again."""
        if not self.error:
            verdict = is_error_head(self._head())
            end = _first_end(self.held, 0, self.ends)
            if verdict is None and end < 0:
                return b""  # its head has not come yet
            if not verdict:  # relayed as it came
                data, rest = (self.held, b"") if end < 0 else (self.held[:end], self.held[end:])
                self.held = b""
                self._relay(data, out)
                return rest
            self.error = True
        end = _first_end(self.held, max(0, self.searched - 3), self.ends)
        if end < 0:
            self.searched = len(self.held)
            if len(self.held) > _MAX_HELD:
                out.append(self.redactor.event(self.held, whole=False))
                self.held, self.searched, self.cut = b"", 0, True
            return b""
        event, rest = self.held[:end], self.held[end:]
        out.append(self.redactor.event(event, whole=not (self.sent or self.cut)))
        self.held, self.sent, self.tail = b"", b"", event[-_KEEP:]
        self.error = self.cut = False
        return rest
