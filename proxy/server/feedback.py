"""Hands the upstream's cache report of an answer to the session's next request: the cost
model's feedback (``proxy.store.cache_feedback``), noted as soon as the usage is known (for a
stream, when its usage event passes), so a client's next request already finds it."""

from __future__ import annotations

from typing import Any

from proxy.store.base import Store
from proxy.store.cache_feedback import CacheFeedback
from proxy.upstream.usage import cache_usage


def note_cache_usage(store: Store, row: dict[str, Any], status: int, usage: Any) -> None:
    """Keep what a successful answer's ``usage`` says of the cache, dated with the request."""
    session = row.get("session_id")
    if status >= 400 or not session:
        return
    reported = cache_usage(usage)
    if reported is None:
        return
    store.cache_feedback.put(
        session,
        CacheFeedback(
            at=row["created_at"],
            prompt_tokens=reported.prompt_tokens,
            cached_tokens=reported.cached_tokens,
            cache_write_tokens=reported.cache_write_tokens,
        ),
    )
