"""A request rewritten, its session still held (``Engine.prepare``): the body to forward now, and
what is left to do once the upstream call is under way (save the session's state, note the
request for the cache attribution, let the session go). The server starts the upstream call
first, so that work runs while the upstream reads the request rather than before it is sent."""

from __future__ import annotations

import contextlib
import dataclasses
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

    @property
    def finished(self) -> bool:
        return self._done is not None

    async def finish(self) -> Rewritten:
        """Save, note, let go: once (a second call gives the first's answer). On a failure (or a
        cancellation) the session is let go all the same and the error raised."""
        if self._done is not None:
            return self._done
        try:
            pending = await self._finish()
        except BaseException:
            self._done = self.rewritten
            await self._held.__aexit__(*sys.exc_info())
            raise
        self._done = dataclasses.replace(self.rewritten, cache=pending)
        await self._held.__aexit__(None, None, None)
        return self._done
