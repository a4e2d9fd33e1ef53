"""``GET /readyz``: readiness, for a load balancer or an orchestrator. Ready when the store (the
request log and the session state, SQLite or PostgreSQL) answers its ``ping`` and each table a
request writes can be read; 503 otherwise, with the reason, so traffic goes to a replica that can
keep sessions. ``/healthz`` stays liveness (the process answers), whatever the store.

The answer is kept ``READY_TTL_S``: balancers probe every second or more often, from each of
their nodes, and a check costs two queries (and, on PostgreSQL, two pooled connections' turns)
that requests would otherwise have; probes meanwhile share the one check under way."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import orjson
from starlette.requests import Request
from starlette.responses import Response

from proxy.store.base import Store

READY_TTL_S = 2.0
CHECK_TIMEOUT_S = 2.0
# The tables each request reads or writes: one dropped (or its first page damaged) loses every
# session's state or every log row, which ``ping``'s ``SELECT 1`` does not notice.
PROBE = (
    "SELECT (SELECT 1 FROM sessions LIMIT 1), (SELECT 1 FROM session_cache LIMIT 1), "
    "(SELECT 1 FROM requests LIMIT 1), (SELECT 1 FROM response_ids LIMIT 1)"
)


@dataclass
class Readiness:
    """The last check's answer (None: ready, else ``(store, reason)``) and when it expires."""

    answer: tuple[str, str] | None = None
    expires: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def check(self, store: Store) -> tuple[str, str] | None:
        async with self.lock:  # probes arriving together share one check
            if time.monotonic() >= self.expires:
                self.answer = await not_ready(store)
                self.expires = time.monotonic() + READY_TTL_S
            return self.answer


async def not_ready(store: Store) -> tuple[str, str] | None:
    """Why the store cannot serve requests, as ``("unreachable" | "unreadable", reason)``; None
    when it can."""
    try:
        if not await store.ping():
            return "unreachable", "the store did not answer its ping"
    except Exception as exc:
        return "unreachable", _said(exc)
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            await store.fetchrow(PROBE, ())
    except TimeoutError:
        return "unreachable", f"its tables did not answer within {CHECK_TIMEOUT_S:g} s"
    except Exception as exc:  # a table gone, a damaged file: what the database said
        return "unreadable", _said(exc)
    return None


def _said(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


async def readyz(request: Request) -> Response:
    state = request.app.state
    readiness: Readiness | None = getattr(state, "readiness", None)
    if readiness is None:
        readiness = state.readiness = Readiness()
    answer = await readiness.check(state.services.store)
    if answer is None:
        body: dict[str, str] = {"status": "ready", "store": "ok"}
    else:
        body = {"status": "not_ready", "store": answer[0], "reason": answer[1]}
    return Response(
        orjson.dumps(body),
        200 if answer is None else 503,
        {"cache-control": "no-store"},
        media_type="application/json",
    )
