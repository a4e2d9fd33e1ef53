"""The upstream call starts before the rewrite is finished (``Engine.prepare``): the session's state
is saved and the request noted for the cache attribution while the upstream reads the request,
not before it is sent. The session stays held until then, so its next request still sees the
state."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from proxy.rewrite.prepared import Prepared
from proxy.rewrite.rewritten import Rewritten

log = logging.getLogger("ctxproxy.server")


async def finish_while(prepared: Prepared, forwarding: asyncio.Future[Any]) -> Rewritten:
    """``prepared`` finished once ``forwarding`` (the upstream call's task, just created) has run
    to its first wait, the request written. If finishing fails, the call is cancelled."""
    await asyncio.sleep(0)  # the call's task runs first: it was scheduled before this resumes
    try:
        return await prepared.finish()
    except BaseException:
        forwarding.cancel()
        await asyncio.gather(forwarding, return_exceptions=True)
        raise


async def let_go(prepared: Prepared, request_id: str) -> None:
    """A request that ended before its upstream call started (an error, a disconnect): finished
    all the same, its session let go; a failure is logged, not raised over the request's own."""
    if prepared.finished:
        return
    try:
        await prepared.finish()
    except Exception:
        log.exception("request %s: saving the session's state failed", request_id)
