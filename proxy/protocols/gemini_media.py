"""Gemini's media parts as the rules count them: an ``inlineData`` or ``fileData`` part (at the top
of a content, or nested in a ``functionResponse``'s own ``parts``, as Gemini 3 takes a function's
images) is an image, audio, video or document by its MIME type, at the providers' estimates
(``rules.media``)."""

from __future__ import annotations

from typing import Any

from rules.media import ESTIMATES

BLOB_KEYS = ("inlineData", "inline_data", "fileData", "file_data")
# the chat view's part types for a MIME type's top-level type; anything else reads as a document
_BY_TOP_TYPE = {"image": "image", "audio": "audio", "video": "video"}


def media_type(part: Any) -> str | None:
    """The chat view's type of a media part (``image``, ``audio``, ``video``, ``document``), or
    None for a part that holds no blob."""
    if not isinstance(part, dict):
        return None
    for key in BLOB_KEYS:
        blob = part.get(key)
        if isinstance(blob, dict):
            mime = blob.get("mimeType", blob.get("mime_type"))
            top = mime.partition("/")[0].lower() if isinstance(mime, str) else ""
            return _BY_TOP_TYPE.get(top, "document")
    return None


def media_estimate(parts: list[Any]) -> int:
    """The estimated tokens of the media among ``parts``."""
    n = 0
    for p in parts:
        kind = media_type(p)
        if kind is not None:
            n += ESTIMATES[kind]
    return n


def response_parts(response: dict[str, Any] | None) -> list[Any] | None:
    """A function response's own parts (its media), or None when it has none."""
    parts = response.get("parts") if response is not None else None
    return parts if isinstance(parts, list) and parts else None
