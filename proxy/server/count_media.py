"""The images and documents of an Anthropic count (``POST /v1/messages/count_tokens`` answered by
the proxy), by their size where it can be read (``proxy.media_size``) rather than the rules' flat
figure per part (``rules.media``): an inline image at Anthropic's width × height / 750 after its
scaling, an inline PDF at ``DOCUMENT_TOKENS`` a page, a plain-text document by its text. A part
whose size cannot be read (a URL, a file id, a header not understood) keeps the flat figure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proxy.media_size import anthropic_image_tokens, image_size, pdf_pages
from rules.media import DOCUMENT_TOKENS, media_tokens


def media_correction(messages: Any, count_text: Callable[[str], int]) -> int:
    """What the sized estimates add to (or take from) the flat ones the chat view's count gave
    the image and document blocks of ``messages`` (Anthropic's), tool results' included."""
    if not isinstance(messages, list):
        return 0
    n = 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                n += _blocks(block["content"], count_text)
            else:
                n += _blocks((block,), count_text)
    return n


def _blocks(blocks: Any, count_text: Callable[[str], int]) -> int:
    n = 0
    for block in blocks:
        if not isinstance(block, dict) or block.get("type") not in ("image", "document"):
            continue
        sized = _sized(block, count_text)
        if sized is not None:
            n += sized - media_tokens([block])
    return n


def _sized(block: dict[str, Any], count_text: Callable[[str], int]) -> int | None:
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
        pages = pdf_pages(source.get("data"))
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
                n += _sized(part, count_text) or media_tokens([part])
        return n
    return None
