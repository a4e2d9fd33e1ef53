"""The images and documents of a count the proxy answers itself, by their size where it can be read
(``proxy.media_size``) rather than the rules' flat figure per part (``rules.media``), by the rule
of the API the count is asked in. Anthropic's (``POST /v1/messages/count_tokens``): an inline image
at width × height / 750 after its scaling, an inline PDF at ``DOCUMENT_TOKENS`` a page, a
plain-text document by its text. Gemini's (``:countTokens``): an inline image at 258 tokens when
neither side is over 384 pixels, else 258 for each 768 × 768 tile; an inline PDF at 258 a page. A
part whose size cannot be read (a URL, a file id, a header not understood) keeps the flat
figure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proxy.media_size import (
    PdfBudget,
    anthropic_image_tokens,
    gemini_image_tokens,
    image_size,
    pdf_pages,
)
from proxy.protocols.gemini_media import BLOB_KEYS, media_type
from rules.media import DOCUMENT_TOKENS, ESTIMATES, media_tokens

GEMINI_PAGE_TOKENS = 258  # Gemini: a document page counts as one image of 258 tokens


def media_correction(messages: Any, count_text: Callable[[str], int]) -> int:
    """What the sized estimates add to (or take from) the flat ones the chat view's count gave
    the image and document blocks of ``messages`` (Anthropic's), tool results' included."""
    if not isinstance(messages, list):
        return 0
    n, budget = 0, PdfBudget()  # the request's PDFs share one bound
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                n += _blocks(block["content"], count_text, budget)
            else:
                n += _blocks((block,), count_text, budget)
    return n


def _blocks(blocks: Any, count_text: Callable[[str], int], budget: PdfBudget) -> int:
    n = 0
    for block in blocks:
        if not isinstance(block, dict) or block.get("type") not in ("image", "document"):
            continue
        sized = _sized(block, count_text, budget)
        if sized is not None:
            n += sized - media_tokens([block])
    return n


def _sized(
    block: dict[str, Any], count_text: Callable[[str], int], budget: PdfBudget
) -> int | None:
    source = block.get("source")
    if not isinstance(source, dict):
        return None
    kind = source.get("type")
    if block["type"] == "image":
        if kind != "base64":
            return None
        size = image_size(source.get("data"))
        return None if size is None else anthropic_image_tokens(*size)
    if kind == "base64" and source.get("media_type") == "application/pdf":
        pages = pdf_pages(source.get("data"), budget)
        return None if pages is None else pages * DOCUMENT_TOKENS
    if kind == "text" and isinstance(source.get("data"), str):
        return count_text(source["data"])
    if kind == "content" and isinstance(source.get("content"), list):
        n = 0
        for part in source["content"]:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                n += count_text(part["text"])
            elif part.get("type") == "image":
                n += _sized(part, count_text, budget) or media_tokens([part])
        return n
    return None


def gemini_media_correction(contents: Any) -> int:
    """What the sized estimates add to (or take from) the flat ones the chat view's count gave
    the inline images and PDFs of Gemini ``contents`` (a ``functionResponse``'s own parts too)."""
    if not isinstance(contents, list):
        return 0
    n, budget = 0, PdfBudget()  # the request's PDFs share one bound
    for content in contents:
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            n += _gemini_part(part, budget)
            response = part.get("functionResponse") if isinstance(part, dict) else None
            inner = response.get("parts") if isinstance(response, dict) else None
            for nested in inner if isinstance(inner, list) else ():
                n += _gemini_part(nested, budget)
    return n


def _gemini_part(part: Any, budget: PdfBudget) -> int:
    kind = media_type(part)
    if kind not in ("image", "document"):
        return 0
    blob = next(part[k] for k in BLOB_KEYS if isinstance(part.get(k), dict))
    data = blob.get("data")
    mime = blob.get("mimeType", blob.get("mime_type"))
    if kind == "image":
        size = image_size(data)
        sized = None if size is None else gemini_image_tokens(*size)
    elif isinstance(mime, str) and mime.lower() == "application/pdf":
        pages = pdf_pages(data, budget)
        sized = None if pages is None else pages * GEMINI_PAGE_TOKENS
    else:
        sized = None
    return 0 if sized is None else sized - ESTIMATES[kind]
