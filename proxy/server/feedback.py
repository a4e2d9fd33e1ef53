"""What the upstream's usage of an answer feeds back: its cache report to the session's next
request (the cost model's feedback, ``proxy.store.cache_feedback``), noted as soon as the usage
is known (for a stream, when its usage event passes), so a client's next request already finds
it; and the request's cache line (``proxy.attribution``), written with the row's completion."""

from __future__ import annotations

from typing import Any

from proxy.attribution.attribute import Usage
from proxy.attribution.ledger import CacheLedger, Pending
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


def cache_line(
    ledger: CacheLedger,
    pending: Pending | None,
    row: dict[str, Any],
    status: int,
    usage: Any,
    diagnosis: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The request's cache line once its answer is in (None for a failed one): settled in the
    session's ledger with the usage, the provider's own diagnosis beside it when it gave one."""
    if pending is None or status >= 400:
        return None
    reported = cache_usage(usage)
    counted = None
    if reported is not None and reported.prompt_tokens is not None:
        counted = Usage(
            reported.prompt_tokens, reported.cached_tokens or 0, reported.cache_write_tokens or 0
        )
    line, decided = ledger.settle(pending, str(row["id"]), counted)
    if decided:
        line["decided"] = decided
    if diagnosis:
        line["provider"] = diagnosis
    return line
