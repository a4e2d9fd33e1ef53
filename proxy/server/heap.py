"""The serving process's garbage collector, set once the app has started.

A request allocates thousands of short-lived containers (the parsed body, the rules' views of it),
nearly all freed by reference counting; with CPython's default first threshold (700) that alone
sets off a young collection every ~15 requests. And every full collection walks everything the
process built at startup (modules, settings, the tokenizer's tables): measured in-process on the
20-message ``/v1/messages`` request, one every ~1,500 requests, each ~50 ms of one request's time.

So, for ``ctxproxy serve`` only (tests and library users keep the defaults): what startup built
is collected once and frozen (``gc.freeze``: never scanned again), and young collections wait for
``YOUNG_THRESHOLD`` net new objects. Garbage in reference cycles is still collected, later: what
cycles a failed request leaves (an exception's frames holding its body) lives a little longer, and
a cycle among objects made before the freeze is never collected (one-off start-up objects).
What later collections leave is frozen too (``proxy.server.collector``, the next setup hook)."""

from __future__ import annotations

import gc
from typing import Any

# Net new tracked objects before a young collection (CPython's default: 700). Measured on the
# 20-message request: ~40 survive each request, so a collection every ~250 requests instead of
# ~15, each still bounded by this many objects.
YOUNG_THRESHOLD = 10_000


def settle_heap(app: Any = None, services: Any = None) -> None:
    """Setup hook (``app.state.setup_hooks``): collect and freeze what startup built, then raise
    the young generation's threshold."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
