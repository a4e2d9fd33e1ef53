"""What the upstream's usage of an answer feeds back: its cache report to the session's next
request (the cost model's feedback, ``proxy.store.cache_feedback``), noted as soon as the usage
is known (for a stream, when its usage event passes), so a client's next request already finds
it; and the request's cache line (``proxy.attribution``), written with the row's completion."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import orjson

from proxy.attribution import diagnostics
from proxy.attribution.attribute import Usage
from proxy.attribution.ledger import CacheLedger, Pending
from proxy.settings import UpstreamSettings
from proxy.store.base import Store
from proxy.store.cache_feedback import CacheFeedback
from proxy.upstream.usage import CacheUsage

log = logging.getLogger("ctxproxy.handler")


def note_cache_usage(
    store: Store, row: dict[str, Any], status: int, reported: CacheUsage | None
) -> None:
    """Keep what a successful answer's usage says of the cache (``reported``: its
    ``cache_usage``, read once for the feedback, the row and the cache line), dated with the
    request."""
    session = row.get("session_id")
    if status >= 400 or not session:
        return
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


# The protocols whose native upstream answers a diagnosis request (``diagnostics``).
_DIAGNOSED = {("anthropic", "anthropic"), ("responses", "openai")}


def ask_diagnosis(
    ledger: CacheLedger,
    pending: Pending | None,
    upstream: UpstreamSettings,
    protocol: str,
    body: dict[str, Any],
    headers: dict[str, str],
) -> tuple[Pending | None, dict[str, Any], dict[str, str]]:
    """With ``cache_diagnostics`` on the upstream: the body to forward asking the provider for
    its diagnosis against the session's previous answer (a new dict), the headers that enable
    it, and the request's pending line marked as asked; else all three as they were."""
    if pending is None or not upstream.cache_diagnostics:
        return pending, body, headers
    if (protocol, upstream.kind) not in _DIAGNOSED:
        return pending, body, headers
    previous = ledger.previous_response(pending.session_id)
    watched = replace(pending, diagnose=True)  # its answer's id: the next request's comparison
    fields = diagnostics.request_fields(protocol, previous)
    asked = diagnostics.asked(body, fields) if fields is not None else None
    if asked is None:  # nothing to compare with yet, or the client asked itself
        return watched, body, headers
    if protocol == "anthropic":
        headers = diagnostics.with_beta(headers)
    return replace(watched, compared_with=previous), asked, headers


def cache_line(
    ledger: CacheLedger,
    pending: Pending | None,
    row: dict[str, Any],
    status: int,
    reported: CacheUsage | None,
    answer: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The request's cache line once its answer is in (None for a failed one): settled in the
    session's ledger with the usage (``reported``: its ``cache_usage``), the provider's own
    diagnosis beside it when it was asked for (``answer``: the answer's id and diagnosis
    holder)."""
    if pending is None or status >= 400:
        return None
    counted = None
    if reported is not None and reported.prompt_tokens is not None:
        counted = Usage(
            reported.prompt_tokens, reported.cached_tokens or 0, reported.cache_write_tokens or 0
        )
    answer_id = diagnosis = None
    if pending.diagnose and answer is not None:
        answer_id = diagnostics.response_id(answer)
        diagnosis = diagnostics.diagnosis(answer)
    line, decided = ledger.settle(pending, str(row["id"]), counted, answer_id)
    if decided:
        line["decided"] = decided
    if diagnosis and pending.compared_with is not None:
        line["provider"] = {**diagnosis, "compared_with": pending.compared_with}
    return line


def with_cache_line(
    fields: dict[str, Any],
    ledger: CacheLedger,
    pending: Pending | None,
    row: dict[str, Any],
    status: int,
    reported: CacheUsage | None,
    answer: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A row's completion with its cache line; a failure of ours leaves the line out."""
    try:
        line = cache_line(ledger, pending, row, status, reported, answer)
    except Exception:
        log.exception("the cache line of %s failed", row.get("id"))
        return fields
    return fields if line is None else {**fields, "cache": line}


def whole_answer(body: bytes | None) -> dict[str, Any] | None:
    """A whole JSON answer, parsed (for its id and diagnosis)."""
    if not body:
        return None
    try:
        found = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return found if isinstance(found, dict) else None
