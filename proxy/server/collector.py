"""The serving process's collections kept short: what survives one is frozen, never walked again.

CPython 3.11 walks a survivor again in every collection of the generation it was promoted to, and
each collection holds the interpreter lock: every tenant's requests wait for it. What survives in
a long-running server is mostly what its bounded caches keep (the session memos alone, at their
64 MB bound, some 350,000 tracked objects). Measured on a replay of the corpus that fills them
(``bench.collector_pauses``): middle collections of 60–470 ms about every 1,200 requests, and a
full one of 0.6–1.1 s whenever CPython's rule sets one off.

So, for ``ctxproxy serve``:

- right after any collection, what survived it is frozen (``gc.freeze`` from the collector's own
  callback, a constant-time merge: only objects just walked, nothing allocated since). The middle
  and oldest generations stay empty, and a collection walks only what was made since the last;
- every ``YOUNG_EVERY`` requests, at the end of one with no other in flight, a young collection
  walks what they left (every ``YOUNG_AT_MOST`` requests whatever is in flight). CPython counts
  allocations less deallocations, so a conversation whose request replaces the last one's objects
  grows the young generation far past its threshold unseen (up to ~90,000 objects, a 100 ms
  collection); collected so, it holds a few requests' survivors.

A frozen object is still freed by reference counting once let go (the parsed bodies, the caches'
evicted entries); only reference cycles among frozen objects are never collected (none were found
in the replay, nor over 4,000 requests of the four protocols through the app: the bench's
``--app``). Those are reclaimed: once the process's small-object blocks
(``sys.getallocatedblocks``, read at most every ``CHECK_S``) are more than twice what they were
after the last reclaim, plus ``RECLAIM_FLOOR``, a reclaim (unfreeze, one full collection, freeze
again) runs at the next request's end with no other in flight, or at any request's end once
``MAX_WAIT_S`` have passed. So a leak of cycles grows the
heap to at most twice its size at the last reclaim (and the floor) before it is collected."""

from __future__ import annotations

import gc
import logging
import sys
import time
from typing import Any

log = logging.getLogger("ctxproxy.collector")

# Small-object blocks beyond twice the count after the last reclaim before the next one is due
# (a block is one object or string of up to 512 bytes): about 100 MB of them.
RECLAIM_FLOOR = 1_500_000
# A young collection after this many requests, at a lull; after the most, at a request's end (one
# costs ~0.03 ms of a 20-message request's leftovers on a quiet machine: not on every request).
YOUNG_EVERY = 8
YOUNG_AT_MOST = 64
CHECK_S = 5.0  # how often the blocks are counted (a walk over the allocator's arenas)
# A reclaim due waits this long for a moment with no request in flight, then runs at a request's
# end all the same (a server never idle would otherwise keep its cycles for ever).
MAX_WAIT_S = 60.0


class Collector:
    """The callback that freezes survivors, and an observer of the requests (``Observers``) that
    collects what a request left at a lull and runs a due reclaim."""

    def __init__(self, young_at_lull: bool = True) -> None:
        self.young_at_lull = young_at_lull
        self.open = 0  # requests in flight (event loop only)
        self.ended = 0  # requests ended since the last collection
        self.reclaim_at = sys.getallocatedblocks() * 2 + RECLAIM_FLOOR
        self.checked = time.monotonic()
        self.due_since: float | None = None
        self.reclaims = 0
        # for /metrics: each collection's pause (any thread's: the interpreter lock orders them)
        self.collections = 0
        self.pause_s = 0.0
        self.longest_s = 0.0
        self._began = 0.0

    def install(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def uninstall(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        """After each collection, on the thread that ran it: freeze what survived it."""
        if phase == "start":
            self._began = time.perf_counter()
            return
        gc.freeze()
        self.ended = 0
        pause = time.perf_counter() - self._began
        self.collections += 1
        self.pause_s += pause
        self.longest_s = max(self.longest_s, pause)

    # the observer
    def started(self) -> None:
        self.open += 1

    def finished(self, row: dict[str, Any]) -> None:
        self.open = max(0, self.open - 1)
        self.ended += 1
        now = time.monotonic()
        if self.due_since is None and now - self.checked >= CHECK_S:
            self.checked = now
            if sys.getallocatedblocks() > self.reclaim_at:
                self.due_since = now
        if self.due_since is not None and (self.open == 0 or now - self.due_since > MAX_WAIT_S):
            self.reclaim()
        elif self.young_at_lull and (
            self.ended >= YOUNG_AT_MOST or (self.open == 0 and self.ended >= YOUNG_EVERY)
        ):
            gc.collect(0)  # what the requests left, walked once now (the callback freezes it)

    def reclaim(self) -> None:
        """Unfreeze everything and collect it once (the cycles among what was frozen go); the
        callback freezes what is left."""
        started = time.perf_counter()
        gc.unfreeze()
        collected = gc.collect()
        gc.freeze()  # done by the callback; here too for a collector whose callback is removed
        self.reclaim_at = sys.getallocatedblocks() * 2 + RECLAIM_FLOOR
        self.due_since = None
        self.reclaims += 1
        log.info(
            "collector: a full collection found %d unreachable objects in %.0f ms",
            collected, (time.perf_counter() - started) * 1000,
        )  # fmt: skip


def install_collector(app: Any = None, services: Any = None) -> Collector:
    """Setup hook (``app.state.setup_hooks``, after ``settle_heap``): freeze what each collection
    leaves, collect what requests leave at lulls, reclaim between the requests ``services``
    observes; its counts served at ``/metrics``."""
    collector = Collector()
    collector.install()
    if services is not None:
        services.observers.add(collector)
    if app is not None:
        app.state.collector = collector
        metrics = getattr(app.state, "metrics", None)  # ``proxy.telemetry.metrics.setup``'s
        if metrics is not None:
            metrics.count_collections(collector)
    return collector
