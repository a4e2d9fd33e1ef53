"""A client's ``cache_control`` marks, left out where litellm would turn them into paid state:
for Gemini (Google AI Studio, or a Gemini model on Vertex AI) litellm makes each marked prefix a
context-cache object (``POST /cachedContents``, stored an hour at Google's default, billed per
hour), calls it before every request, and fails the request when Google refuses the cache (a
model or tier without explicit caching). Gemini caches prefixes by itself; a mark gains nothing
there. The client's body is never changed: what holds a mark is copied without it."""

from __future__ import annotations

from typing import Any

MARK = "cache_control"
_MAX_DEPTH = 16  # nesting walked at most (a tool result's blocks in a message's content)


def creates_paid_caches(provider: str, model: str) -> bool:
    """Whether litellm makes context-cache objects of ``cache_control`` marks for ``model``."""
    return provider == "gemini" or (provider.startswith("vertex_ai") and "gemini" in model.lower())


def without_cache_marks(value: Any, depth: int = 0) -> Any:
    """``value`` with every ``cache_control`` key left out; what holds none is returned as it is
    (the very object)."""
    if depth > _MAX_DEPTH:
        return value
    if isinstance(value, dict):
        changed = MARK in value
        out: dict[str, Any] = {}
        for key, child in value.items():
            if key == MARK:
                continue
            new = without_cache_marks(child, depth + 1)
            changed = changed or new is not child
            out[key] = new
        return out if changed else value
    if isinstance(value, list):
        items = [without_cache_marks(child, depth + 1) for child in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value
