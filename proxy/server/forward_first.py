"""The rewrite is finished while the upstream reads the request (``Engine.prepare``): the
session's state is saved and the request noted for the cache attribution after the request is
sent, not before. The session stays held until then, so its next request still sees the state.
A request refused leaves the state as it was (``refused``)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from proxy.failures import STOPPING
from proxy.rewrite.prepared import Prepared
from proxy.rewrite.rewritten import Rewritten

if TYPE_CHECKING:
    from proxy.rewrite.engine import Engine

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
    """However the request ended (an error before its upstream call, a disconnect): its session
    let go, finished if its upstream call was made (an error before it saves nothing); a failure
    is logged, not raised over the request's own outcome."""
    if prepared.settled:
        return
    try:
        if not prepared.finished:  # never forwarded: nothing of it is kept
            await prepared.let_go()
            return
        await prepared.finish()
    except Exception:
        log.exception("request %s: saving the session's state failed", request_id)


async def refused(
    engine: Engine, prepared: Prepared, request_id: str, last: Rewritten | None = None
) -> None:
    """A request refused (by the upstream, or by the proxy after its rewrite) leaves its
    session's state as it was, before its answer is sent (a client retrying at once would run
    on the refused attempt's state): not saved when its finish has not begun, else put back
    once saved (``Engine.take_back``; ``last``: the overflow rescue's retry), to the end even
    when the client goes meanwhile, its save still running or not. A failure is logged."""
    if not prepared.finished:
        await prepared.let_go()
        return

    async def put_back_once_saved() -> bool:
        return await engine.take_back(await finished(prepared, request_id), last)

    await _to_the_end(request_id, put_back_once_saved())


async def put_back(
    engine: Engine, request_id: str, first: Rewritten, last: Rewritten | None = None
) -> None:
    """``Engine.take_back(first, last)``, run to its end even when the client goes meanwhile
    (shielded); a failure is logged."""
    await _to_the_end(request_id, engine.take_back(first, last))


async def _to_the_end(request_id: str, putting_back: Coroutine[Any, Any, bool]) -> None:
    """``putting_back`` in a task of its own, shielded from the caller's cancellation (which is
    raised all the same); its failure logged, not raised."""
    putting = asyncio.ensure_future(putting_back)
    putting.add_done_callback(functools.partial(_put_back, request_id))
    try:
        await asyncio.shield(putting)
    except STOPPING:
        raise
    except BaseException:  # logged by ``_put_back``
        pass


def _put_back(request_id: str, task: asyncio.Future[bool]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error(
            "request %s: putting the session's state back failed", request_id, exc_info=exc
        )
