"""A clock for the tests' CPU budgets (regexes, parsers proved linear): the calling thread's CPU
time with the garbage collector paused. Late in the suite a full collection of the whole test
process' heap can take half a second, and it is not the code under test's cost."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Took:
    seconds: float = 0.0


@contextmanager
def cpu_timer() -> Iterator[Took]:
    took = Took()
    was_enabled = gc.isenabled()
    gc.disable()
    started = time.thread_time()
    try:
        yield took
    finally:
        took.seconds = time.thread_time() - started
        if was_enabled:
            gc.enable()
