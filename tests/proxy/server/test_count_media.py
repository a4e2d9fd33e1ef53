"""An Anthropic count the proxy answers itself weighs an inline image by its size (Anthropic's
width × height / 750 after its scaling, read from the header) and an inline PDF by its pages, not
a flat figure each; an image or PDF it cannot read keeps the flat figure, and no input makes it
fail or take long."""

from __future__ import annotations

import base64
import struct
import time
import zlib
from pathlib import Path

import orjson
import pytest

from proxy.media_size import MAX_PDF_PAGES, PdfBudget, anthropic_image_tokens, image_size, pdf_pages
from rules.media import DOCUMENT_TOKENS, IMAGE_TOKENS
from tests.conftest import in_process, proxy_settings
from tests.support.cpu_clock import cpu_timer

JSON = {"content-type": "application/json", "x-api-key": "sk-ant-client"}


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    exif = b"\xff\xe1" + struct.pack(">H", 2 + 30_000) + b"\x00" * 30_000  # a long segment first
    sof = b"\xff\xc2" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + exif + sof + b"\xff\xd9"


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00;"


def webp_vp8x(width: int, height: int) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\x00\x00\x00\x00"
    body += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def webp_lossless(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    body = b"VP8L" + struct.pack("<I", 5) + b"\x2f" + struct.pack("<I", bits)
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def webp_lossy(width: int, height: int) -> bytes:
    frame = b"\x00\x00\x00\x9d\x01\x2a" + struct.pack("<HH", width, height)
    body = b"VP8 " + struct.pack("<I", len(frame)) + frame
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def pdf(pages: int, object_stream: bool = False) -> bytes:
    kids = " ".join(f"{3 + i} 0 R" for i in range(pages))
    head = b"%PDF-1.5\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
    head += f"2 0 obj << /Type /Pages /Kids [{kids}] /Count {pages} >> endobj\n".encode()
    objects = ["<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>" for _ in range(pages)]
    if not object_stream:
        body = "".join(f"{3 + i} 0 obj {o} endobj\n" for i, o in enumerate(objects)).encode()
        return head + body + b"%%EOF\n"
    packed = zlib.compress(" ".join(objects).encode())
    stream = f"9 0 obj << /Type/ObjStm /N {pages} /First 0 /Filter /FlateDecode >>\nstream\n"
    return head + stream.encode() + packed + b"\nendstream\nendobj\n%%EOF\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def image(data: bytes, media_type: str = "image/png") -> dict:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": b64(data)},
    }


def document(data: bytes) -> dict:
    return {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": b64(data)},
    }


@pytest.mark.parametrize(
    ("make", "size"),
    [
        (png, (640, 480)),
        (jpeg, (4032, 3024)),
        (gif, (320, 200)),
        (webp_vp8x, (1920, 1080)),
        (webp_lossless, (100, 60)),
        (webp_lossy, (800, 600)),
    ],
)
def test_image_headers(make, size) -> None:
    assert image_size(b64(make(*size))) == size


def test_anthropic_rule() -> None:
    assert anthropic_image_tokens(200, 200) == 54  # 40,000 / 750
    assert anthropic_image_tokens(1092, 1092) == 1590  # Anthropic's table: ~1,590
    assert anthropic_image_tokens(8000, 8000) == IMAGE_TOKENS  # scaled to its cap
    assert anthropic_image_tokens(1, 1) == 1


def test_pdf_pages() -> None:
    assert pdf_pages(b64(pdf(3))) == 3
    assert pdf_pages(b64(pdf(7, object_stream=True))) == 7
    assert pdf_pages(b64(b"%PDF-1.7\n" + b"\x00" * 120_000)) == 3  # by its size: 50 KB a page


@pytest.mark.parametrize(
    "data",
    [
        "",
        "!!!not base64!!!",
        "A" * 2_000_000,
        b64(b"\x89PNG\r\n\x1a\n"),  # cut short
        b64(b"\xff\xd8" + b"\xff\xe1\x00\x00" * 50_000),  # a segment of length 0
        b64(b"\xff\xd8" + b"\xff\xe1\xff\xff" + b"\x00" * 300_000),  # the frame past the bound
        b64(png(0, 10)),
        "é" * 10,
        12345,
    ],
)
def test_unreadable_images_are_none_and_quick(data) -> None:
    started = time.perf_counter()
    assert image_size(data) is None
    assert time.perf_counter() - started < 0.5


def test_a_hostile_pdf_is_bounded() -> None:
    bomb = zlib.compress(b"/Type /Page " * 3_000_000)  # 36 MB inflated, 40 KB sent
    stream = b"1 0 obj << /Type /ObjStm >>\nstream\n" + bomb + b"\nendstream\n"
    started = time.perf_counter()
    pages = pdf_pages(b64(b"%PDF-1.5\n" + stream * 3))
    assert time.perf_counter() - started < 2.0
    assert pages is not None and pages <= 16 * 1024 * 1024 // len(b"/Type /Page ") + 1
    assert pdf_pages("%%%") is None or pdf_pages("%%%") >= 1


def settings(base_url: str = "http://upstream.test/v1"):
    return proxy_settings(
        base_url, upstreams=[{"name": "local", "match": ["*"], "base_url": base_url}]
    )


async def _count(client, blocks: list) -> int:
    body = {
        "model": "local-model",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "look"}, *blocks]}],
    }
    r = await client.post("/v1/messages/count_tokens", content=orjson.dumps(body), headers=JSON)
    assert r.status_code == 200, r.text
    return int(r.json()["input_tokens"])


async def test_the_count_weighs_images_and_pdfs_by_size(tmp_path: Path) -> None:
    async with in_process(settings(), str(tmp_path / "db")) as client:
        bare = await _count(client, [])
        small = await _count(client, [image(png(200, 200))])
        large = await _count(client, [image(jpeg(4032, 3024), "image/jpeg")])
        unread = await _count(client, [image(b"not an image at all")])
        three = await _count(client, [document(pdf(3))])
        text = {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "a short note"},
        }
        note = await _count(client, [text])
    assert small - bare == 54
    assert large - bare == IMAGE_TOKENS
    assert unread - bare == IMAGE_TOKENS  # unknown size: the flat figure
    assert three - bare == 3 * DOCUMENT_TOKENS
    assert 0 < note - bare < 20


async def test_a_tool_results_image_is_weighed_too(tmp_path: Path) -> None:
    def ask(content: list) -> dict:
        return {
            "model": "local-model",
            "messages": [
                {"role": "user", "content": "shoot"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": content}],
                },
            ],
        }

    async with in_process(settings(), str(tmp_path / "db")) as client:
        counts = []
        for content in (
            [{"type": "text", "text": "ok"}],
            [{"type": "text", "text": "ok"}, image(gif(150, 100))],
        ):
            r = await client.post(
                "/v1/messages/count_tokens", content=orjson.dumps(ask(content)), headers=JSON
            )
            assert r.status_code == 200, r.text
            counts.append(r.json()["input_tokens"])
    assert counts[1] - counts[0] == 20  # 15,000 / 750


async def test_hostile_media_never_fails_the_count(tmp_path: Path) -> None:
    blocks = [
        image(b"\xff\xd8" + b"\xff\xe1\x00\x02" * 40_000, "image/jpeg"),
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "@@@"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": b64(b"garbage")},
        },
    ]
    async with in_process(settings(), str(tmp_path / "db")) as client:
        r = await client.post(
            "/v1/messages/count_tokens",
            content=orjson.dumps(
                {"model": "local-model", "messages": [{"role": "user", "content": blocks}]}
            ),
            headers=JSON,
        )
    assert r.status_code in (200, 400), r.text


def test_gemini_rule() -> None:
    from proxy.media_size import gemini_image_tokens

    assert gemini_image_tokens(384, 200) == 258
    assert gemini_image_tokens(1024, 768) == 2 * 258
    # scaled to fit 3072 × 3072 first (aspect kept): 3072 × 2304, 4 × 3 tiles
    assert gemini_image_tokens(4032, 3024) == 4 * 3 * 258
    assert gemini_image_tokens(65535, 65535) == 16 * 258  # a header's largest: 16 tiles at most
    assert gemini_image_tokens(65535, 1) == 4 * 258


def test_a_documents_pages_are_at_most_a_thousand() -> None:
    assert pdf_pages(b64(b"%PDF-1.4\n" + b"/Type /Page " * 200_000)) == MAX_PDF_PAGES
    # past what the request may still scan: by its size (a page a 50 KB), the same bound
    assert pdf_pages(b64(b"%PDF-1.4\n" + b"x" * 120_000), PdfBudget(scanned=1000)) == 3


def test_the_pdfs_of_one_request_share_one_bound() -> None:
    """100 deflate bombs in one request (4.5 MiB) took 21 s when each PDF had a bound of its own:
    the request's PDFs now share one, and those past it are estimated from their size."""
    bomb = zlib.compress(b"/Type /Page " * 3_000_000)  # 36 MB inflated, 40 KB sent
    one = b64(b"%PDF-1.5\n1 0 obj << /Type /ObjStm >>\nstream\n" + bomb + b"\nendstream\n")
    budget = PdfBudget()
    with cpu_timer() as took:
        pages = [pdf_pages(one, budget) for _ in range(100)]
    assert took.seconds < 1.0, took.seconds
    assert budget.inflated <= 0 and all(p is not None and 1 <= p <= MAX_PDF_PAGES for p in pages)


async def test_a_gemini_count_here_weighs_images_and_pdfs(tmp_path: Path) -> None:
    """``:countTokens`` for a model no ``gemini`` upstream serves, counted by Gemini's rule."""
    headers = {"content-type": "application/json", "x-goog-api-key": "AIza-client-key"}

    def inline(data: bytes, mime: str) -> dict:
        return {"inlineData": {"mimeType": mime, "data": b64(data)}}

    async def count(client, *parts: dict) -> int:
        contents = [{"role": "user", "parts": [{"text": "look"}, *parts]}]
        r = await client.post(
            "/v1beta/models/local-model:countTokens", json={"contents": contents}, headers=headers
        )
        assert r.status_code == 200, r.text
        return int(r.json()["totalTokens"])

    async with in_process(settings(), str(tmp_path / "db")) as client:
        bare = await count(client)
        small = await count(client, inline(png(300, 200), "image/png"))
        large = await count(client, inline(jpeg(1600, 800), "image/jpeg"))
        doc = await count(client, inline(pdf(4), "application/pdf"))
        unread = await count(client, inline(b"???", "image/webp"))
        # 2,400 headers of 65535 × 65535 (220 KiB): an answer of 500 (an integer past 64 bits)
        huge = await count(client, *[inline(png(65535, 65535), "image/png")] * 2400)
    assert huge - bare == 2400 * 16 * 258
    assert small - bare == 258
    assert large - bare == 3 * 2 * 258
    assert doc - bare == 4 * 258
    assert unread - bare == IMAGE_TOKENS  # unknown size: the flat figure
