"""The rewrite is finished while the upstream reads the request (``Engine.prepare``): the
session's state is saved and the request noted for the cache attribution after the request is
sent, not before. The session stays held until then, so its next request still sees the state."""

from __future__ import annotations

import logging

from proxy.failures import STOPPING
from proxy.rewrite.prepared import Prepared
from proxy.rewrite.rewritten import Rewritten

log = logging.getLogger("ctxproxy.server")


async def finished(prepared: Prepared, request_id: str) -> Rewritten:
    """``prepared`` finished once the upstream has answered. The answer is the client's whatever
    happened to the bookkeeping: a failure to save is logged, and the request goes on without
    its cache line."""
    try:
        return await prepared.finish()
    except STOPPING:
        raise
    except BaseException:  # a native panic (pyo3's is no Exception) is bookkeeping's too
        log.exception("request %s: saving the session's state failed", request_id)
        return prepared.rewritten


async def let_go(prepared: Prepared, request_id: str) -> None:
    """However the request ended (an error before its upstream call, a disconnect): finished, its
    session let go; a failure is logged, not raised over the request's own outcome."""
    if prepared.settled:
        return
    try:
        await prepared.finish()
    except Exception:
        log.exception("request %s: saving the session's state failed", request_id)
