"""What completes a request's log row: status, latency, time to first byte, usage, the error (its
text redacted: an upstream's error may echo the key it got) and, with ``capture_payloads``, the
answer's body, redacted."""

from __future__ import annotations

import time
from typing import Any

import orjson

from proxy.errors import ProxyError
from proxy.upstream.usage import CacheUsage, usage_fields
from rules.redact import redact, redact_text


def completion_fields(
    row: dict[str, Any],
    started: float,
    status: int,
    error: ProxyError | None,
    ttfb: float | None,
    usage: dict[str, Any] | None = None,
    response_body: bytes | None = None,
    ended: float | None = None,
    capture: bool = False,
    reported: CacheUsage | None = None,
) -> dict[str, Any]:
    """The row's completion; its latency ends at ``ended`` (``perf_counter``: when the answer was
    ready, before it was sent), else now. ``reported``: the usage's ``cache_usage``, if read."""
    end = time.perf_counter() if ended is None else ended
    fields: dict[str, Any] = {
        "status": status,
        "latency_ms": round((end - started) * 1000, 3),
        "ttfb_ms": round(ttfb, 3) if ttfb is not None else None,
        "client_disconnected": row.get("client_disconnected", 0),
        **usage_fields(usage, reported),
    }
    report = row.get("report")
    if isinstance(report, dict) and "breakpoints" in report:  # added after the row was queued
        fields["report"] = report
    if error is not None:
        fields["error_type"] = error.code
        fields["error"] = redact_text(error.message)
    elif status >= 400 and response_body:  # an upstream's error may echo the key it got
        fields["error_type"] = "upstream_status"
        fields["error"] = redact_text(response_body[:2000].decode("utf-8", "replace"))
    if response_body is not None and capture:
        fields["response_body"] = redacted_text(response_body)
    return fields


def redacted_text(body: bytes) -> str:
    try:
        return orjson.dumps(redact(orjson.loads(body))).decode()
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, RecursionError):
        # not JSON, or JSON nested too deep to write back: stored as redacted text
        return str(redact(body.decode("utf-8", "replace")))
