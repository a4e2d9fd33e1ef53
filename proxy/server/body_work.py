"""The handler's work on a whole body, done off the event loop when it is heavy
(``proxy.rewrite.offload``): reading it (parse and validate, past what the session's previous
body shares with it) and writing it out for the log when payloads are captured."""

from __future__ import annotations

import logging
from typing import Any

import orjson

from proxy.errors import BadRequest
from proxy.protocols.body_memory import BodyMemory
from proxy.protocols.surrogates import may_hold_surrogates, mended_surrogates
from proxy.rewrite.offload import Offload
from proxy.server.capture_bound import within
from proxy.server.log_fields import CAPTURE_INLINE_BYTES
from rules.redact import redact

log = logging.getLogger("ctxproxy.body")


async def mended_body(offload: Offload, raw: bytes, error: BadRequest) -> bytes:
    """``raw`` with its lone surrogate escapes mended (``proxy.protocols.surrogates``), to be
    read again, when ``error`` (its parse's) may be theirs; else ``error`` is raised. Looked for
    only once a body failed to parse: a scan of every body cost 0.1 ms a 60 KB request."""
    if error.code != "invalid_json" or not may_hold_surrogates(raw):
        raise error
    mended, count = await offload.maybe(offload.heavy(len(raw)), mended_surrogates, raw)
    if not count:
        raise error
    log.info("mended %d lone surrogate escape(s) in the request body as U+FFFD", count)
    return mended


async def read_body_json(
    bodies: BodyMemory, offload: Offload, raw: bytes, hint: str | None, principal: str
) -> tuple[dict[str, Any], int, bytes]:
    """The body parsed and validated, how many of its bytes were new, and its bytes (mended, if
    a lone surrogate escape broke it: ``mended_body``): read here when few are new, else in the
    worker."""
    try:
        return (*await _read(bodies, offload, raw, hint, principal), raw)
    except BadRequest as exc:
        raw = await mended_body(offload, raw, exc)
        return (*await _read(bodies, offload, raw, hint, principal), raw)


async def _read(
    bodies: BodyMemory, offload: Offload, raw: bytes, hint: str | None, principal: str
) -> tuple[dict[str, Any], int]:
    read = bodies.read(raw, hint, principal, inline=offload.threshold)
    if read is None:
        read = await offload.run(bodies.read, raw, hint, principal)
    assert read is not None  # read whatever it takes without ``inline``
    return read


def captured_json(body: dict[str, Any]) -> str:
    """A body as the log keeps it: redacted JSON text, its strings cut past
    ``CAPTURE_MAX_BYTES`` (``capture_bound``)."""
    return orjson.dumps(redact(within(body, len(orjson.dumps(body))))).decode()


def _captured(body: dict[str, Any], forwarded: dict[str, Any]) -> dict[str, str]:
    return {"request_body": captured_json(body), "forwarded_body": captured_json(forwarded)}


async def captured(
    offload: Offload, size: int, body: dict[str, Any], forwarded: dict[str, Any]
) -> dict[str, str]:
    """The log row's copies of the request and forwarded bodies, redacted (``size``: the
    body's bytes, which decide where the work runs: a worker unless small, as for an answer)."""
    return await offload.maybe(size > CAPTURE_INLINE_BYTES, _captured, body, forwarded)
