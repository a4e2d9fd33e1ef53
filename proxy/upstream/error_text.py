"""An upstream's error, and the request, read as text for redaction (``error_redaction``): a long
error event cut to its error, a compressed error body decoded within a bound, the characters of
a value's short strings, what a request said."""

from __future__ import annotations

import zlib
from typing import Any

import orjson

_MAX_DECODED = 1 << 20  # an encoded error body is read up to this size
EVENT_CHARS = 4 * 1024  # an error event's text, each one (see ``error_redaction``)
SHORT = 256  # a string this short (a type, a code, a param) is kept whole while they are few


def error_only(data: bytes) -> bytes:
    """A long error event's JSON as its type and its error's type, code and message (each cut):
    the rest of it, however many members, is not read on."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data[: 4 * EVENT_CHARS]  # read as text, cut
    if not isinstance(value, dict):
        return b'{"error": {"message": "The upstream sent an error too long to show."}}'
    error = value.get("error")
    kept: dict[str, Any] = {}
    if isinstance(value.get("type"), str):
        kept["type"] = value["type"][:SHORT]
    if isinstance(error, dict):
        kept["error"] = {
            k: (v[:EVENT_CHARS] if isinstance(v, str) else v)
            for k, v in error.items()
            if k in ("type", "code", "message", "status") and isinstance(v, (str, int))
        }
    elif isinstance(error, str):
        kept["error"] = error[:EVENT_CHARS]
    return orjson.dumps(kept)


def short_chars(value: Any) -> int:
    """The characters of ``value``'s strings of at most ``SHORT``."""
    if isinstance(value, str):
        return len(value) if len(value) <= SHORT else 0
    if isinstance(value, dict):
        return sum(short_chars(v) for v in value.values())
    if isinstance(value, list):
        return sum(short_chars(v) for v in value)
    return 0


def decoded(body: bytes, encoding: str) -> bytes | None:
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


def as_text(sent: Any) -> str:
    """What a request said as text: its body's JSON read and written again (no escapes but
    those a quote of it cannot hold), or its bytes as UTF-8 where they are no JSON; a tuple
    holds its parts (the body, the path and its query)."""
    if isinstance(sent, tuple):
        return "\n".join(as_text(part) for part in sent)
    if isinstance(sent, (bytes, bytearray, memoryview)):
        try:
            sent = orjson.loads(sent)
        except orjson.JSONDecodeError:
            return bytes(sent).decode("utf-8", "replace")
    if isinstance(sent, str):
        return sent
    try:
        return orjson.dumps(sent).decode()
    except (TypeError, orjson.JSONEncodeError):
        return ""
