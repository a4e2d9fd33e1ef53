"""Where a cache diagnosis names the earlier answer it compares with (Responses'
``prompt_cache_options.comparison_response_id``, Anthropic's ``diagnostics.previous_message_id``):
through a shared key, ``provider_refs`` lets one go only when it names the principal's own."""

from __future__ import annotations

from typing import Any

# where each protocol's cache diagnosis names the earlier answer it compares with
_COMPARISONS = {
    "responses": ("prompt_cache_options", "comparison_response_id"),
    "anthropic": ("diagnostics", "previous_message_id"),
}


def comparisons(protocol: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(param, id) of the earlier answer a cache diagnosis in ``body`` compares with (an id that
    is not a string names none: the provider's to refuse)."""
    if protocol not in _COMPARISONS:
        return []
    holder, name = _COMPARISONS[protocol]
    options = body.get(holder)
    named = options.get(name) if isinstance(options, dict) else None
    return [(f"{holder}.{name}", named)] if isinstance(named, str) else []


def asks_diagnosis(protocol: str, body: dict[str, Any]) -> bool:
    """Whether an Anthropic ``body`` asks for a cache diagnosis itself: its answer is then the
    comparison the principal's next one may name."""
    return protocol == "anthropic" and isinstance(body.get("diagnostics"), dict)
