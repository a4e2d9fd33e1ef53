"""How long a thread keeps the interpreter before another waiting for it takes its turn.

A request bringing 64 KiB or more of new work runs on a worker thread, but the event loop needs
the interpreter's lock at each of its turns (every read, write and timer of every other request),
and CPython hands the lock over only every ``sys.getswitchinterval()`` (5 ms by default): another
tenant's small request, waking the loop a dozen times, waited 5 ms at each while one tenant's
bodies of 190,000 blocks were worked on (p50 4.6 → 19–26 ms, p99 to 320 ms). At 0.5 ms the loop
waits a tenth of that (a loop turn beside two busy threads: 13–15 ms → 0.8–1.3 ms at the p50);
the hand-overs cost only while two threads want the interpreter at once."""

from __future__ import annotations

import sys

SWITCH_INTERVAL_S = 0.0005


def share_the_interpreter() -> None:
    """Set the interval for this process (``ctxproxy serve``, as its server is configured)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
