"""A request rewritten, its session still held (``Engine.prepare``): the body to forward now, and
what is left to do once the upstream call is under way (save the session's state, note the
request for the cache attribution, let the session go). The server starts that work in a task
of its own just before it sends the request, so it runs while the upstream reads the request
rather than before the request is sent."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable

from proxy.attribution.ledger import Pending
from proxy.rewrite.rewritten import Rewritten


class Prepared:
    def __init__(
        self,
        rewritten: Rewritten,
        finish: Callable[[], Awaitable[Pending]],
        held: contextlib.AsyncExitStack,
    ) -> None:
        self.rewritten = rewritten  # its ``cache`` is set by ``finish``
        self._finish = finish
        self._held = held
        self._done: Rewritten | None = None
        self._task: asyncio.Task[Rewritten] | None = None

    @property
    def finished(self) -> bool:
        """Finished, or finishing in its task."""
        return self._done is not None or self._task is not None

    @property
    def settled(self) -> bool:
        """Its state saved (or the save failed) and the session let go, or being let go."""
        return self._done is not None

    def finish_soon(self) -> None:
        """Finish in a task that first lets the loop run once: called just before the upstream
        call, whose request body is written by a task of the HTTP client's own (aiohttp on this
        Python), so that the body goes out before the state is saved."""
        if self._task is None and self._done is None:
            self._task = asyncio.ensure_future(self._complete(yield_first=True))
            self._task.add_done_callback(_retrieved)

    async def finish(self) -> Rewritten:
        """Save, note, let go, once (a second call gives the first's answer; with a task
        running, its answer, the task shielded from the caller's cancellation). On a failure
        or a cancellation the session is let go all the same and the error raised."""
        if self._task is not None:
            return await asyncio.shield(self._task)
        if self._done is None:
            return await self._complete()
        return self._done

    async def let_go(self) -> Rewritten:
        """The session let go with nothing saved or noted (``ctxproxy rewrite``: what would be
        forwarded, the log it read left as it was)."""
        if self._done is None and self._task is None:
            self._done = self.rewritten
            await self._held.__aexit__(None, None, None)
        return await self.finish()

    async def _complete(self, yield_first: bool = False) -> Rewritten:
        if yield_first:
            await asyncio.sleep(0)
        try:
            pending = await self._finish()
        except BaseException:
            self._done = self.rewritten
            await self._held.__aexit__(*sys.exc_info())
            raise
        self._done = self.rewritten.with_cache(pending)
        await self._held.__aexit__(None, None, None)
        return self._done


def _retrieved(task: asyncio.Task[Rewritten]) -> None:
    """A failed finish is raised to whoever awaits it, and logged there; none may (a request
    that ended meanwhile): read here, so asyncio does not report it as never retrieved."""
    if not task.cancelled():
        task.exception()
