"""An upstream's ``usage`` as the request log keeps it: token counts in any provider's spelling,
and only values an INTEGER column can hold."""

from __future__ import annotations

from typing import Any

import orjson


def usage_fields(usage: dict[str, Any] | None) -> dict[str, Any]:
    """Usage as logged: prompt/completion tokens and cached tokens in any provider's spelling."""
    if not isinstance(usage, dict):
        return {}
    details = usage.get("prompt_tokens_details") or {}
    cached = (
        (details.get("cached_tokens") if isinstance(details, dict) else None)
        or usage.get("prompt_cache_hit_tokens")
        or usage.get("cache_read_input_tokens")
        or 0
    )
    return {
        "usage": usage,
        "prompt_tokens": _count(usage.get("prompt_tokens")),
        "completion_tokens": _count(usage.get("completion_tokens")),
        "cached_tokens": _count(cached) or 0,
    }


def _count(value: Any) -> int | None:
    """A token count as an INTEGER column takes it: whatever else an upstream sends is logged
    in ``usage`` as it came, never in the column (a list there would stop the writer)."""
    if type(value) is int and 0 <= value < 2**63:
        return value
    return None


def usage_of(body: bytes | None) -> dict[str, Any] | None:
    """The ``usage`` object of a whole JSON answer, if it has one."""
    if not body:
        return None
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    usage = obj.get("usage") if isinstance(obj, dict) else None
    return usage if isinstance(usage, dict) else None
