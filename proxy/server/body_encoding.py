"""A request body sent compressed (``Content-Encoding``): gzip and deflate are decoded, within
the body limit as decoded (a small body may expand a thousandfold); any other coding is refused
with 415 naming it, rather than its bytes read as JSON. What goes upstream is the decoded body,
without the header."""

from __future__ import annotations

import zlib

from proxy.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType

# what each coding is to zlib: a gzip member, or a zlib stream (HTTP's "deflate"; some clients
# send raw deflate, tried next)
_WBITS = {"gzip": 31, "x-gzip": 31, "deflate": 15}
_CHUNK = 1 << 20  # decoded bytes taken at a time, so the limit is checked as it grows
_SHOWN = 40  # characters of an unknown coding named in the answer


def codings(header: str | None) -> list[str]:
    """The codings applied, first applied first (``identity`` is none)."""
    if not header:
        return []
    out = [c.strip().lower() for c in header.split(",")]
    return [c for c in out if c and c != "identity"]


def decode(raw: bytes, header: str, limit: int) -> bytes:
    """``raw`` with its codings undone, last applied first; raises the client's error."""
    for coding in reversed(codings(header)):
        wbits = _WBITS.get(coding)
        if wbits is None:
            raise UnsupportedMediaType(
                f"Content-Encoding {coding[:_SHOWN]!r} is not supported: send the body "
                "uncompressed, gzip or deflate."
            )
        raw = _inflate(raw, coding, wbits, limit)
    return raw


def _inflate(raw: bytes, coding: str, wbits: int, limit: int) -> bytes:
    try:
        return _bounded(raw, wbits, limit)
    except zlib.error:
        if coding != "deflate":
            raise BadRequest(f"The request body is not valid {coding} data.") from None
    try:
        return _bounded(raw, -15, limit)  # raw deflate, without the zlib wrapper
    except zlib.error:
        raise BadRequest("The request body is not valid deflate data.") from None


def _bounded(raw: bytes, wbits: int, limit: int) -> bytes:
    stream = zlib.decompressobj(wbits)
    parts: list[bytes] = []
    size = 0
    data = raw
    while True:
        part = stream.decompress(data, _CHUNK)
        size += len(part)
        if size > limit:
            raise PayloadTooLarge(f"Request body exceeds the limit of {limit} bytes decoded.")
        parts.append(part)
        data = stream.unconsumed_tail
        if not data:
            break
    tail = stream.flush()
    if size + len(tail) > limit:
        raise PayloadTooLarge(f"Request body exceeds the limit of {limit} bytes decoded.")
    parts.append(tail)
    if not stream.eof:
        raise zlib.error("truncated")
    if stream.unused_data.strip():
        raise zlib.error("trailing data")
    return b"".join(parts)
