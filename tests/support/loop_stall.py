"""How long the event loop stops answering while something runs on it: a ticker task sleeps
``tick_s`` in a loop and records the longest gap beyond its sleep. A request that holds the loop
(parsing a huge body inline, say) shows up as a gap as long as it holds it; one whose work runs in
a worker thread leaves only the GIL's handovers (~5 ms each).

    async with LoopStall() as stall:
        await client.post(...)
    assert stall.max_s < 0.25

``polled_healthz`` does the same from outside a live server: it polls ``/healthz`` and records
the slowest answer."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from types import TracebackType

import httpx


class LoopStall:
    """The longest stall of the running loop while the ``async with`` block runs."""

    def __init__(self, tick_s: float = 0.005) -> None:
        self.tick_s = tick_s
        self.max_s = 0.0
        self.at = 0.0  # when the longest stall began (``time.perf_counter``)
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        clock = time.perf_counter
        while True:
            before = clock()
            await asyncio.sleep(self.tick_s)
            gap = clock() - before - self.tick_s
            self.ticks += 1
            if gap > self.max_s:
                self.max_s, self.at = gap, before + self.tick_s

    async def __aenter__(self) -> LoopStall:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)  # the ticker is running before the block starts
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._task is not None
        await asyncio.sleep(self.tick_s * 2)  # a stall at the very end is measured too
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    @property
    def max_ms(self) -> float:
        return round(self.max_s * 1000, 1)


class HealthPoller:
    """Polls a live server's ``/healthz`` from a thread while a block runs; ``max_s``: the
    slowest answer (a request the server never answered counts as the whole block)."""

    def __init__(self, url: str, interval_s: float = 0.01) -> None:
        self.url = url.rstrip("/") + "/healthz"
        self.interval_s = interval_s
        self.max_s = 0.0
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self._stop.is_set():
                before = time.perf_counter()
                client.get(self.url).raise_for_status()
                took = time.perf_counter() - before
                self.polls += 1
                self.max_s = max(self.max_s, took)
                self._stop.wait(self.interval_s)

    def __enter__(self) -> HealthPoller:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        time.sleep(self.interval_s * 3)
        self._stop.set()
        self._thread.join(timeout=60)

    @property
    def max_ms(self) -> float:
        return round(self.max_s * 1000, 1)
