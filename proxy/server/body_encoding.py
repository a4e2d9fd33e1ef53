"""A request body sent compressed (``Content-Encoding``): one gzip or deflate coding is decoded,
within the body limit as decoded (a small body may expand a thousandfold), one body at a time
in a thread of its own (zlib lets go of the GIL; nothing else waits behind it). Any other
coding, or codings stacked (each multiplies what a few bytes expand to), is refused with 415
before the body is read. What goes upstream is the decoded body, without the header."""

from __future__ import annotations

import asyncio
import zlib
from concurrent.futures import ThreadPoolExecutor

from proxy.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType

# what each coding is to zlib: gzip members, or a zlib stream (HTTP's "deflate"; some clients
# send raw deflate, tried next)
_WBITS = {"gzip": 31, "x-gzip": 31, "deflate": 15}
_CHUNK = 1 << 20  # decoded bytes taken at a time, so the limit is checked as it grows
_MAX_MEMBERS = 64  # gzip members in one body: a client compresses it once, or in a few pieces
_SHOWN = 40  # characters of a refused coding named in the answer
_INFLATE = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxproxy-inflate")


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
    return await asyncio.get_running_loop().run_in_executor(_INFLATE, decode, raw, coding, limit)


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
