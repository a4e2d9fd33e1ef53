"""Token estimates for the parts of a message a tokenizer cannot read (images, audio, documents),
so the proxy's own count of a conversation is not blind to them. Fixed figures per part, from the
providers' published estimates (docs/rules/measure.md#media-parts says where each comes from):
the size of a part is not known without decoding it, and counting must stay a lookup per part."""

from __future__ import annotations

from typing import Any

from rules.messages import ABSORBED, MEDIA_TOKENS

# A full-size image: Anthropic's ~1,600 tokens (width × height / 750, for the largest image sent
# unscaled, about 1.15 megapixels). OpenAI's high detail is 85 + 170 per 512-pixel tile: 765 for a
# 1024 × 1024 image, 1,105 for the largest layout.
IMAGE_TOKENS = 1_600
# OpenAI's ``"detail": "low"``: a flat 85 tokens whatever the image's size.
IMAGE_LOW_DETAIL_TOKENS = 85
# A clip of 30 seconds at Gemini's 32 tokens a second (OpenAI's user audio: 10 tokens a second).
AUDIO_TOKENS = 960
# A document or file of one page, at the top of Anthropic's 1,500-3,000 tokens a PDF page.
DOCUMENT_TOKENS = 3_000
# A clip of 30 seconds at Gemini's 263 tokens a second (its frames and its sound).
VIDEO_TOKENS = 7_890

# By the part's ``type``, in every protocol the proxy speaks (the adapters' chat view keeps the
# type of a part the rules cannot read).
ESTIMATES: dict[str, int] = {
    "image_url": IMAGE_TOKENS,  # OpenAI Chat Completions
    "input_image": IMAGE_TOKENS,  # Responses API
    "image": IMAGE_TOKENS,  # Anthropic Messages
    "input_audio": AUDIO_TOKENS,  # Chat Completions, Responses API
    "audio": AUDIO_TOKENS,
    "document": DOCUMENT_TOKENS,  # Anthropic Messages (PDF, text, content sources)
    "file": DOCUMENT_TOKENS,  # Chat Completions
    "input_file": DOCUMENT_TOKENS,  # Responses API
    "video": VIDEO_TOKENS,  # Gemini's video parts (its adapter names a part by its MIME type)
}


def _low_detail(part: dict[str, Any]) -> bool:
    if part.get("detail") == "low":  # Responses: ``{"type": "input_image", "detail": "low"}``
        return True
    inner = part.get("image_url")  # Chat: ``{"type": "image_url", "image_url": {"detail": …}}``
    return inner.__class__ is dict and inner.get("detail") == "low"


def media_tokens(content: Any) -> int:
    """The estimated tokens of the media parts of a message's ``content`` (0 for a string), nested
    parts included where ``rules.messages.text_of`` reads nested text (a part's ``content``)."""
    if content.__class__ is not list:
        return 0
    n = 0
    for part in content:
        if part.__class__ is not dict:
            continue
        kind = part.get("type")
        estimate = ESTIMATES.get(kind) if kind.__class__ is str else None
        if estimate is not None:
            low = estimate == IMAGE_TOKENS and _low_detail(part)
            n += IMAGE_LOW_DETAIL_TOKENS if low else estimate
        else:
            inner = part.get("content")
            if inner.__class__ is list:
                n += media_tokens(inner)
    return n


def marked_media_tokens(message: dict[str, Any]) -> int:
    """The tokens of the media an adapter holds for a tool message outside its content
    (``rules.messages.MEDIA_TOKENS``), its own and those of the results merged into it
    (``ABSORBED``)."""
    n = message.get(MEDIA_TOKENS)
    total = n if n.__class__ is int and n > 0 else 0
    absorbed = message.get(ABSORBED)
    if absorbed.__class__ is list:
        for m in absorbed:
            k = m.get(MEDIA_TOKENS) if m.__class__ is dict else None
            if k.__class__ is int and k > 0:
                total += k
    return total


def message_media_tokens(message: dict[str, Any]) -> int:
    """The estimated tokens of all the media a message stands for: the parts of its content and
    the blocks its adapter holds (``marked_media_tokens``)."""
    content = message.get("content")
    n = 0 if content.__class__ is str else media_tokens(content)
    if MEDIA_TOKENS in message or ABSORBED in message:
        n += marked_media_tokens(message)
    return n
