"""The size of an image or a PDF sent inline (base64), read cheaply and within fixed bounds, for
the token counts the proxy answers itself (``proxy.server.count_tokens``): an image's width and
height from its header (PNG, JPEG, GIF, WebP), a PDF's pages from its page objects. The rules'
own estimates stay flat figures per part (``rules.media``); these are for a count a client asks.

Untrusted input: an image's header is read from at most ``IMAGE_HEADER_BYTES`` of the image (the
base64 decoded only that far). The PDFs of one request share one ``PdfBudget``: at most
``PDF_BYTES`` decoded and scanned and ``INFLATED_BYTES`` of compressed object streams inflated in
all, whatever the number of documents (a request of 100 deflate bombs took 21 s when each had a
bound of its own); a PDF past what is left is estimated from its size. A count is at most
``MAX_PDF_PAGES`` pages a document, an image at most the provider's largest scaling. Anything
unreadable is None (the caller keeps its flat estimate), never an exception."""

from __future__ import annotations

import binascii
import math
import re
import zlib
from dataclasses import dataclass

# A JPEG's frame header comes after its EXIF and ICC segments (each at most 64 KiB): 128 KiB
# of the image, 174,764 base64 characters, reach it in all but the oddest files.
IMAGE_HEADER_BYTES = 128 * 1024
# A request's PDFs decoded and scanned up to this in all; the rest estimated from their size.
PDF_BYTES = 32 * 1024 * 1024
# Of a PDF's compressed object streams (where PDF 1.5 writers put the page objects), at most this
# many bytes inflated in all, from at most ``OBJECT_STREAMS`` streams.
INFLATED_BYTES = 1024 * 1024  # a 1,000-page PDF's page objects are some 300 KB
OBJECT_STREAMS = 1024
# The most pages a document counts (Gemini reads at most 1,000; Anthropic fewer)
MAX_PDF_PAGES = 1000
# A PDF whose pages cannot be found: a page for every this many bytes (a text page is some 5-50
# KB, a scanned one 100 KB or more).
PDF_BYTES_PER_PAGE = 50_000

# Anthropic's rule: about width × height / 750 tokens, the image first scaled down (aspect kept)
# to at most 1568 pixels on its long edge and about 1.15 megapixels (~1,600 tokens).
ANTHROPIC_LONG_EDGE = 1568
ANTHROPIC_MAX_TOKENS = 1_600
ANTHROPIC_PIXELS_PER_TOKEN = 750
# Gemini's rule: an image with no side over 384 pixels is 258 tokens; a larger one is cut into
# tiles of 768 × 768, 258 tokens each.
GEMINI_SMALL = 384
GEMINI_TILE = 768
GEMINI_TILE_TOKENS = 258
GEMINI_LONG_EDGE = 3072  # Gemini scales a larger image down to fit 3072 × 3072, aspect kept


def _b64_prefix(data: str, size: int) -> bytes | None:
    """The first ``size`` bytes (about) of base64 ``data``, or None when they do not decode."""
    chars = data[: (size + 2) // 3 * 4]
    chars = chars[: len(chars) // 4 * 4]
    try:
        return binascii.a2b_base64(chars)
    except (binascii.Error, ValueError):
        return None


def image_size(data: object) -> tuple[int, int] | None:
    """(width, height) of a base64 PNG, JPEG, GIF or WebP, from its header; None when unknown."""
    if not isinstance(data, str) or not data.isascii():
        return None
    head = _b64_prefix(data, IMAGE_HEADER_BYTES)
    if not head:
        return None
    size = _header_size(head)
    if size is None or size[0] <= 0 or size[1] <= 0:
        return None
    return size


def _header_size(b: bytes) -> tuple[int, int] | None:
    if b.startswith(b"\x89PNG\r\n\x1a\n") and len(b) >= 24 and b[12:16] == b"IHDR":
        return int.from_bytes(b[16:20], "big"), int.from_bytes(b[20:24], "big")
    if b[:6] in (b"GIF87a", b"GIF89a") and len(b) >= 10:
        return int.from_bytes(b[6:8], "little"), int.from_bytes(b[8:10], "little")
    if b[:4] == b"RIFF" and b[8:12] == b"WEBP":
        return _webp_size(b)
    if b[:2] == b"\xff\xd8":
        return _jpeg_size(b)
    return None


def _webp_size(b: bytes) -> tuple[int, int] | None:
    chunk = b[12:16]
    if len(b) < 30 and not (chunk == b"VP8L" and len(b) >= 25):
        return None
    if chunk == b"VP8 " and b[23:26] == b"\x9d\x01\x2a":  # lossy: a key frame's dimensions
        w = int.from_bytes(b[26:28], "little") & 0x3FFF
        h = int.from_bytes(b[28:30], "little") & 0x3FFF
        return w, h
    if chunk == b"VP8L" and b[20] == 0x2F:  # lossless: 14 bits each, less one
        bits = int.from_bytes(b[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":  # extended: the canvas, 24 bits each, less one
        return int.from_bytes(b[24:27], "little") + 1, int.from_bytes(b[27:30], "little") + 1
    return None


# start-of-frame markers (not DHT 0xC4, JPG 0xC8, DAC 0xCC)
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(b: bytes) -> tuple[int, int] | None:
    """The frame header's size, segment by segment (each step moves on at least 2 bytes)."""
    i, end = 2, len(b)
    while i + 1 < end:
        if b[i] != 0xFF:
            return None
        marker = b[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # no length
            i += 2
            continue
        if marker in (0xD9, 0xDA):  # the end, or the scan before any frame header
            return None
        if i + 4 > end:
            return None
        length = int.from_bytes(b[i + 2 : i + 4], "big")
        if length < 2:
            return None
        if marker in _SOF:
            if i + 9 > end:
                return None
            h = int.from_bytes(b[i + 5 : i + 7], "big")
            w = int.from_bytes(b[i + 7 : i + 9], "big")
            return w, h
        i += 2 + length
    return None


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic's estimate for an image of ``width`` × ``height``: its pixels / 750 after the
    scaling it applies (long edge 1568 at most, ~1.15 megapixels), at least 1."""
    scale = min(1.0, ANTHROPIC_LONG_EDGE / max(width, height))
    pixels = width * scale * height * scale
    return max(1, min(ANTHROPIC_MAX_TOKENS, math.ceil(pixels / ANTHROPIC_PIXELS_PER_TOKEN)))


def gemini_image_tokens(width: int, height: int) -> int:
    """Gemini's count for an image of ``width`` × ``height``: 258 when neither side is over 384
    pixels, else 258 for each 768 × 768 tile of it scaled to fit 3072 × 3072 (at most 16)."""
    if width <= GEMINI_SMALL and height <= GEMINI_SMALL:
        return GEMINI_TILE_TOKENS
    scale = min(1.0, GEMINI_LONG_EDGE / max(width, height))
    w, h = max(1.0, width * scale), max(1.0, height * scale)
    return math.ceil(w / GEMINI_TILE) * math.ceil(h / GEMINI_TILE) * GEMINI_TILE_TOKENS


# a page object (not the page tree's ``/Pages``), names written with or without spaces
_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z0-9])")
_OBJECT_STREAM = re.compile(rb"/Type\s*/ObjStm(?![A-Za-z0-9])")
_STREAM = re.compile(rb"stream\r?\n")


@dataclass
class PdfBudget:
    """What the PDFs of one request may still cost: bytes decoded and scanned, bytes inflated,
    object streams opened."""

    scanned: int = PDF_BYTES
    inflated: int = INFLATED_BYTES
    streams: int = OBJECT_STREAMS


def pdf_pages(data: object, budget: PdfBudget | None = None) -> int | None:
    """The pages of a base64 PDF (at most ``MAX_PDF_PAGES``): its page objects, in the file and
    in its compressed object streams, within what is left of ``budget`` (the request's: a new one
    when None); where none is found (encrypted, damaged, or past the budget), one for every
    ``PDF_BYTES_PER_PAGE`` bytes. None when it is not base64."""
    if not isinstance(data, str) or not data.isascii():
        return None
    budget = PdfBudget() if budget is None else budget
    size = len(data) * 3 // 4
    if size > budget.scanned:
        return _by_size(size)
    budget.scanned -= size
    pdf = _b64_prefix(data, size)
    if pdf is None:
        return None
    pages = len(_PAGE.findall(pdf)) + _object_stream_pages(pdf, budget)
    return min(pages, MAX_PDF_PAGES) if pages else _by_size(len(pdf))


def _by_size(size: int) -> int:
    return max(1, min(MAX_PDF_PAGES, math.ceil(size / PDF_BYTES_PER_PAGE)))


def _object_stream_pages(pdf: bytes, budget: PdfBudget) -> int:
    pages, at = 0, 0
    while budget.inflated > 0 and budget.streams > 0:
        found = _OBJECT_STREAM.search(pdf, at)
        if found is None:
            break
        start = _STREAM.search(pdf, found.end())
        if start is None:
            break
        end = pdf.find(b"endstream", start.end())
        end = len(pdf) if end < 0 else end
        budget.streams -= 1
        at = end
        try:
            inflated = zlib.decompressobj().decompress(pdf[start.end() : end], budget.inflated)
        except zlib.error:
            continue
        budget.inflated -= len(inflated)
        pages += len(_PAGE.findall(inflated))
    return pages
