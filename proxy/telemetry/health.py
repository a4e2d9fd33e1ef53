"""``GET /readyz``: readiness, for a load balancer or an orchestrator. Ready when the store (the
request log and the session state, SQLite or PostgreSQL) answers its ``ping``; 503 otherwise, so
traffic goes to a replica that can keep sessions. ``/healthz`` stays liveness (the process
answers), whatever the store."""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response


async def readyz(request: Request) -> Response:
    store = request.app.state.services.store
    try:
        reachable = bool(await store.ping())
    except Exception:
        reachable = False
    body = {"status": "ready", "store": "ok"} if reachable else {
        "status": "not_ready", "store": "unreachable"}  # fmt: skip
    return Response(
        orjson.dumps(body),
        200 if reachable else 503,
        {"cache-control": "no-store"},
        media_type="application/json",
    )
