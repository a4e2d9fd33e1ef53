"""What completes a request's log row: status, latency, time to first byte, usage, the error (its
text redacted: an upstream's error may echo the key it got) and, with ``capture_payloads``, the
answer's body, redacted."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.errors import ProxyError
from proxy.rewrite.offload import Offload
from proxy.server.capture_bound import CAPTURE_MAX_BYTES
from proxy.server.captured_stream import redact_split_secrets
from proxy.upstream.usage import CacheUsage, usage_fields
from rules.redact import PREFIX_MARGIN, redact, redact_text, redacted_prefix

log = logging.getLogger("ctxproxy.handler")


ERROR_CHARS = 2000  # of an upstream's error body, kept in the row


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
    response_total: int | None = None,
) -> dict[str, Any]:
    """The row's completion; its latency ends at ``ended`` (``perf_counter``: when the answer was
    ready, before it was sent), else now. ``reported``: the usage's ``cache_usage``, if read.
    ``response_total``: the answer's bytes, where ``response_body`` kept its start only."""
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
        # its first 2,000 characters, redacted as read past the cut (a key it splits goes whole)
        text = response_body[: ERROR_CHARS * 4 + PREFIX_MARGIN].decode("utf-8", "replace")
        fields["error"] = redacted_prefix(text, ERROR_CHARS)
    if response_body is not None and capture:  # redacted when the row is finished
        fields["response_body"] = CapturedAnswer(response_body, response_total)
    return fields


@dataclass(frozen=True)
class CapturedAnswer:
    """An answer the log keeps, not yet redacted: ``with_captured_answer`` redacts it."""

    body: bytes
    total: int | None


# A captured text's redaction costs up to ~2 µs a character when it is dense in secret names
# (50 µs a kilobyte of prose): past this size it runs in a worker, not on the event loop.
CAPTURE_INLINE_BYTES = 1024


async def with_captured_answer(offload: Offload, fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with its captured answer redacted (off the event loop unless small); a failure
    of ours leaves the answer out of the row, which still completes."""
    answer = fields.get("response_body")
    if not isinstance(answer, CapturedAnswer):
        return fields
    heavy = len(answer.body) > CAPTURE_INLINE_BYTES
    try:
        text = await offload.maybe(heavy, captured_text, answer.body, answer.total)
    except Exception:
        log.exception("capturing the answer failed")
        text = None
    return {**fields, "response_body": text}


# An answer is captured up to CAPTURE_MAX_BYTES: its redaction runs on the event loop, and a
# stream kept whole grew for as long as it lasted (``limits.stream_max_s``, an hour)


def captured_text(body: bytes, total: int | None = None) -> str:
    """The answer as the log keeps it: redacted, its first ``CAPTURE_MAX_BYTES`` only (``total``:
    its whole size, where ``body`` is its start)."""
    whole = max(len(body), total or 0)
    if whole <= CAPTURE_MAX_BYTES:
        return redacted_text(body)
    # redacted as read past the cut, then cut (as many characters as the bound's bytes hold):
    # cut first, a secret the cut split lost what names it and kept its beginning
    room = len(body[:CAPTURE_MAX_BYTES].decode("utf-8", "replace"))
    text = redact_split_secrets(body[: CAPTURE_MAX_BYTES + READ_PAST].decode("utf-8", "replace"))
    kept = redacted_prefix(text, room)
    return kept + f"\n[ctxproxy: {whole - CAPTURE_MAX_BYTES} more bytes not captured]"


READ_PAST = 64 * 1024  # bytes of an answer past the capture's bound read to redact its cut


def redacted_text(body: bytes) -> str:
    try:
        return orjson.dumps(redact(orjson.loads(body))).decode()
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, RecursionError):
        # not JSON (an event stream), or JSON nested too deep to write back: stored as redacted
        # text, a secret split across a stream's events too
        return redact_text(redact_split_secrets(body.decode("utf-8", "replace")))
