"""Noticing a client that goes away mid-request, from the ASGI ``receive`` channel."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import Receive


class DisconnectWatch:
    """Watches ``receive`` for the client going away while we wait upstream or relay a stream,
    and cancels the request's task then: the upstream call is abandoned (its connection closed,
    so a generating upstream stops) instead of running on for nobody."""

    def __init__(self, receive: Receive) -> None:
        self.receive = receive
        self.fired = False
        self._task: asyncio.Task[None] | None = None
        self._owner: asyncio.Task[Any] | None = None

    async def __aenter__(self) -> DisconnectWatch:
        self._owner = asyncio.current_task()
        self._task = asyncio.get_running_loop().create_task(self._watch())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        self.stop()
        if self.fired and self._owner is not None:
            self.fired = False
            # the cancel was ours, handled here; one from outside as well (server shutdown, an
            # enclosing timeout) still stands and goes on up
            remaining = self._owner.uncancel()
            return kind is asyncio.CancelledError and remaining == 0
        return False

    def ours(self) -> bool:
        """Whether a CancelledError being handled is only the watch's own."""
        owner = self._owner
        return self.fired and owner is not None and owner.cancelling() <= 1

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _watch(self) -> None:
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                break
        self.fired = True
        self._task = None
        if self._owner is not None:
            self._owner.cancel()
