"""The garbage collector's full collections held off while a heavy body is worked on.

A full collection walks every tracked object the process holds, under the interpreter lock, on
whichever thread's allocation set it off. While the worker parses and rewrites a body of 20,000
items, that is some 300,000 objects more, and one full collection then took 220–320 ms: the event
loop, and every other tenant's request, stopped for that long (measured with ``gc.callbacks`` on
a live server: its ``/healthz`` answered in 250 ms). Young and middle collections still run (each
walks at most the objects made since the last: 20–50 ms at that size), so short-lived cycles are
still collected; only the full walk waits until no heavy job runs.

A hold lasts at most ``MAX_HOLD_S`` in one stretch: jobs that overlap without end (two workers,
tenants sending heavy bodies back to back) would otherwise keep cyclic garbage that reached the
oldest generation for ever. Past it, full collections resume until every held job is done."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator

# The longest stretch full collections wait: longer than the heaviest body's work (a 16 MiB body
# of 20,000 items takes 7–8 s on a slow core), short enough that what waits stays small.
MAX_HOLD_S = 30.0
_NEVER = 2**31 - 1  # the oldest generation's threshold while held: no full collection is due


class _Hold:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.holders = 0
        self.since = 0.0
        self.saved: int | None = None  # the oldest generation's threshold, while held

    def enter(self) -> None:
        with self._lock:
            self.holders += 1
            if self.holders == 1:
                young, middle, old = gc.get_threshold()
                self.saved, self.since = old, time.monotonic()
                gc.set_threshold(young, middle, _NEVER)

    def leave(self) -> None:
        with self._lock:
            self.holders -= 1
            if self.saved is None:
                return
            if self.holders == 0 or time.monotonic() - self.since > MAX_HOLD_S:
                young, middle, _ = gc.get_threshold()
                gc.set_threshold(young, middle, self.saved)
                self.saved = None


_HOLD = _Hold()


@contextlib.contextmanager
def held() -> Iterator[None]:
    """No full collection starts while the block runs (nor while another holder's does), within
    ``MAX_HOLD_S``."""
    _HOLD.enter()
    try:
        yield
    finally:
        _HOLD.leave()


def holding() -> bool:
    """Whether full collections are held off now."""
    return _HOLD.saved is not None
