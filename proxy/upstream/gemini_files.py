"""Gemini ``fileData`` parts as the bridge carries them to a provider that reads no file by its
URI (``proxy.upstream.gemini_bridge``).

A ``fileData`` part names a file by URI: Google's Files API (readable with the client's Google
key only), a Cloud Storage bucket, a URL. litellm made of it an ``image_url`` or a document
``file_id`` of that URI: Anthropic refuses a ``file_id`` that is not one of its files (on every
retry, while the part stays in the history), no other provider can read a Files API URI, and
for OpenAI litellm fetched the URI itself, from the proxy's host, refusing it as a 400 in its
own words. Each goes as a text part naming the file (as a bridged Anthropic document by URL
does: ``bridge_documents``), so the model knows a file was there. The client's objects are never
changed; contents without such parts are the same objects."""

from __future__ import annotations

from typing import Any

_KEYS = ("fileData", "file_data")
_MAX_SHOWN = 2000  # characters of a URI or a MIME type, named in the text


def named_files(contents: Any) -> Any:
    """``contents`` with each ``fileData`` part a text part naming its file (above)."""
    if not isinstance(contents, list) or not any(_holds_file(c) for c in contents):
        return contents
    return [_content(c) if _holds_file(c) else c for c in contents]


def _content(content: dict[str, Any]) -> dict[str, Any]:
    return {**content, "parts": [_text(p) if _file_of(p) is not None else p
                                 for p in content["parts"]]}  # fmt: skip


def _text(part: dict[str, Any]) -> dict[str, Any]:
    file = _file_of(part) or {}
    uri = file.get("fileUri", file.get("file_uri"))
    mime = file.get("mimeType", file.get("mime_type"))
    what = f"a {str(mime)[:_MAX_SHOWN]} file" if isinstance(mime, str) and mime else "a file"
    where = f" at {str(uri)[:_MAX_SHOWN]}" if isinstance(uri, str) and uri else ""
    return {"text": f"(not attached: {what}{where})"}


def _file_of(part: Any) -> dict[str, Any] | None:
    if not isinstance(part, dict):
        return None
    for key in _KEYS:
        file = part.get(key)
        if isinstance(file, dict):
            return file
    return None


def _holds_file(content: Any) -> bool:
    parts = content.get("parts") if isinstance(content, dict) else None
    return isinstance(parts, list) and any(_file_of(p) is not None for p in parts)
