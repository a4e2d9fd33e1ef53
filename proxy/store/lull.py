"""The moments no model request is being handled: where the store's writer does its work.

A batch's rows are redacted and encoded on the event loop (~40 µs a 20-message request's row)
and its statements run on the connection's thread, which takes the interpreter's lock to bind
them. Done while a request is being handled, that time falls on the request: the slowest of the
20-message requests were those a batch's write overlapped (``bench.overhead_stages``' slowest
1%). So the writer, its batch window over, waits before each step for a lull (no request between
its start and its last observer), for at most ``MAX_DEFER_S`` a batch: under steady load, where
no lull comes, a batch is written that much later than it was, and paced as it was. A batch with
more writes queued behind it does not wait at all (the writer is behind: its queue must drain),
nor does one carrying a statement others may read at once (an unkeyed ``batch.Statement``: a
response id another replica may look up within its short retry, a learned window) or nothing to
write (retention's steps, shutdown). A keyed statement (one session's newest value, its cache
report, queued by every request) waits as the session's state does on SQLite: were it urgent,
every batch would be, and the writer's work would land on the requests again. On PostgreSQL the
state is saved when the session is let go and another replica reads the report with it, so
there a keyed statement does not wait."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from proxy.store.batch import Statement

# The longest a batch waits, in all, for the requests in flight to end.
MAX_DEFER_S = 0.2


def defer_for(ops: Sequence[Any], behind: bool, shared: bool = False) -> float:
    """How long a batch of ``ops`` may wait for a lull: not at all when the writer is behind,
    when there is nothing to write, or when a statement others read soon is in it: an unkeyed
    one, or (``shared``: a store other replicas read, whose session state is saved at once) a
    keyed one too, since a session's next request may land on another replica."""
    if behind or not ops:
        return 0.0
    if any(isinstance(op, Statement) and (shared or op.key is None) for op in ops):
        return 0.0
    return MAX_DEFER_S


class Lull:
    """An observer of the requests (``proxy.telemetry.observe``): how many are being handled,
    and a wait for none to be. Event-loop only."""

    def __init__(self) -> None:
        self.open = 0
        self._quiet = asyncio.Event()
        self._quiet.set()

    def started(self) -> None:
        self.open += 1
        self._quiet.clear()

    def finished(self, row: dict[str, Any]) -> None:
        self.open = max(0, self.open - 1)
        if not self.open:
            self._quiet.set()

    async def wait(self, until: float) -> None:
        """Until no request is being handled, or the loop's clock reaches ``until``; the loop
        runs at least once either way (the writer's steps never hold it two in a row). After
        each turn it looks again: a request may have begun meanwhile (a client at concurrency
        1 sends its next one as soon as it has its answer), and the step then waits for it."""
        loop = asyncio.get_running_loop()
        turned = False
        while True:
            if not self.open:
                if turned:
                    return
                await asyncio.sleep(0)
            else:
                left = until - loop.time()
                if left <= 0:
                    if not turned:
                        await asyncio.sleep(0)
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._quiet.wait(), left)
            turned = True

    def pause(self, defer_s: float = MAX_DEFER_S) -> Pause:
        """The pauses of one batch: each waits for a lull until ``defer_s`` from now."""
        return Pause(self, asyncio.get_running_loop().time() + defer_s)


class Pause:
    """A batch's wait for a lull before each of its steps, all within one deadline."""

    def __init__(self, lull: Lull, until: float) -> None:
        self.lull, self.until = lull, until

    async def __call__(self) -> None:
        await self.lull.wait(self.until)
