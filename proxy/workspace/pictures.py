"""The bootstrap pictures of the configured workspace roots, taken off the event loop and handed
to a session's request as the ``workspace_bootstrap`` hint (``rules.workspace.workspace_map``).

A session is offered the picture until one of its requests gets it: a request waits at most
``workspace.budget_ms`` for it; when it is not ready by then, it goes on without, and a later
request of the session carries it (the picture keeps being taken meanwhile). A picture taken
less than ``refresh_s`` ago serves other sessions' first requests too. The root comes from the
config only (per upstream, or one for all), never from the request."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

from proxy.settings import Settings
from proxy.workspace.picture import Picture, Taker, take_picture
from proxy.workspace_settings import WorkspaceSettings

log = logging.getLogger("ctxproxy.workspace")

MAX_SESSIONS = 10_000  # sessions remembered as served (LRU): a forgotten one is offered it again


class _Named(Protocol):
    name: str


class Pictures:
    def __init__(
        self,
        cfg: WorkspaceSettings,
        upstream_for: Callable[[str], _Named | None] = lambda _: None,
        taker: Taker = take_picture,
    ) -> None:
        self.cfg = cfg
        self._upstream_for = upstream_for
        self._take = taker
        self._taken: dict[str, tuple[float, Picture]] = {}  # root -> (when, picture)
        self._taking: dict[str, asyncio.Future[Picture]] = {}
        self._served: OrderedDict[str, None] = OrderedDict()

    @classmethod
    def of(cls, settings: Settings) -> Pictures | None:
        """The pictures of ``settings``' workspace roots; None when none is configured."""
        if not settings.workspace.enabled:
            return None
        if all(r.name != "workspace_map" for r in settings.configured_rules()):
            log.warning("workspace.root is set but the workspace_map rule is off: not pictured")
            return None
        return cls(settings.workspace, settings.upstream_for)

    def _fresh(self, root: str) -> Picture | None:
        hit = self._taken.get(root)
        if hit is not None and time.monotonic() - hit[0] <= self.cfg.refresh_s:
            return hit[1]
        return None

    def _start(self, root: str) -> asyncio.Future[Picture]:
        running = self._taking.get(root)
        if running is not None:
            return running
        task = asyncio.ensure_future(asyncio.to_thread(self._safely, root))
        self._taking[root] = task

        def done(t: asyncio.Future[Picture]) -> None:
            self._taking.pop(root, None)
            if not t.cancelled() and t.exception() is None:
                self._taken[root] = (time.monotonic(), t.result())

        task.add_done_callback(done)
        return task

    def _safely(self, root: str) -> Picture:
        try:
            return self._take(self.cfg, root)
        except Exception as exc:  # a disk error is no request's failure: the picture says it
            log.warning("workspace picture of %s failed: %s", root, type(exc).__name__)
            return {"root": root, "error": type(exc).__name__, "lines": []}

    async def hint(self, session: str, model: str) -> dict[str, Any]:
        """``{"workspace_bootstrap": picture}`` for a session not served yet, when its picture
        is ready within the budget; else ``{}``. ``session``: the scoped session id; ``model``
        picks the upstream, whose root may be its own."""
        upstream = self._upstream_for(model)
        root = self.cfg.root_for(upstream.name if upstream is not None else None)
        if root is None or session in self._served:
            return {}
        picture = self._fresh(root)
        if picture is None:
            task = self._start(root)
            try:
                picture = await asyncio.wait_for(
                    asyncio.shield(task), timeout=self.cfg.budget_ms / 1000
                )
            except TimeoutError:
                return {}  # the next request of the session carries it
        self._served[session] = None
        while len(self._served) > MAX_SESSIONS:
            self._served.popitem(last=False)
        return {"workspace_bootstrap": picture}

    async def close(self) -> None:
        """Wait for pictures being taken (their threads cannot be cancelled)."""
        running = list(self._taking.values())
        if running:
            await asyncio.gather(*running, return_exceptions=True)
