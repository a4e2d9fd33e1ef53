"""A request body sent compressed (``Content-Encoding``): one gzip or deflate coding is decoded,
within the body limit as decoded (a small body may expand a thousandfold), in two threads of
their own (zlib lets go of the GIL), each principal's bodies one at a time in the order it sent
them (``Offload``'s lines per lane): in one thread taking all in turn, a tenant sending forty
bodies of 31 MiB had another's small one wait 9 s behind them. Any other
coding, or codings stacked (each multiplies what a few bytes expand to), is refused with 415
before the body is read. What goes upstream is the decoded body, without the header."""

from __future__ import annotations

import zlib

from proxy.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType
from proxy.rewrite.offload import Offload

# what each coding is to zlib: gzip members, or a zlib stream (HTTP's "deflate"; some clients
# send raw deflate, tried next)
_WBITS = {"gzip": 31, "x-gzip": 31, "deflate": 15}
_CHUNK = 1 << 20  # decoded bytes taken at a time, so the limit is checked as it grows
_MAX_MEMBERS = 64  # gzip members in one body: a client compresses it once, or in a few pieces
_SHOWN = 40  # characters of a refused coding named in the answer
_INFLATE = Offload(threshold=0, workers=2, name="ctxproxy-inflate")


def coding_of(header: str | None) -> str | None:
    """The one coding to undo (None: the body came as it is); raises 415 for any other."""
    if not header:
        return None
    codings = [c.strip().lower() for c in header.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return None
    if len(codings) > 1 or codings[0] not in _WBITS:
        shown = ", ".join(codings)[:_SHOWN]
        raise UnsupportedMediaType(
            f"Content-Encoding {shown!r} is not supported: send the body uncompressed, or in "
            "one gzip or deflate coding."
        )
    return codings[0]


async def decoded(raw: bytes, coding: str, limit: int) -> bytes:
    """``raw`` decoded (``coding`` from ``coding_of``), off the event loop."""
    return await _INFLATE.run(decode, raw, coding, limit)


def decode(raw: bytes, coding: str, limit: int) -> bytes:
    """``raw`` decoded; raises the client's error (413 past ``limit``, 400 for broken data)."""
    wbits = _WBITS[coding]
    try:
        return _inflate(raw, wbits, limit)
    except zlib.error:
        if coding != "deflate":
            raise BadRequest(f"The request body is not valid {coding} data.") from None
    try:
        return _inflate(raw, -15, limit)  # raw deflate, without the zlib wrapper
    except zlib.error:
        raise BadRequest("The request body is not valid deflate data.") from None


def _inflate(raw: bytes, wbits: int, limit: int) -> bytes:
    """Every member (gzip allows a series), each to its end, the whole within ``limit``."""
    parts: list[bytes] = []
    size = members = 0
    data = raw
    while True:
        stream = zlib.decompressobj(wbits)
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
        size += len(tail)
        if size > limit:
            raise PayloadTooLarge(f"Request body exceeds the limit of {limit} bytes decoded.")
        parts.append(tail)
        if not stream.eof:
            raise zlib.error("truncated")
        data = stream.unused_data
        if wbits == 31 and data.strip(b"\x00"):  # another gzip member
            members += 1
            if members > _MAX_MEMBERS:
                raise zlib.error("too many members")
            continue
        if data.strip():
            raise zlib.error("trailing data")
        return b"".join(parts)
