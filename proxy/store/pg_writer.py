"""The request log's writer on PostgreSQL: one task per replica takes the queued rows in batches
(one ``executemany`` per statement shape), as the SQLite writer does, and keeps the same
guarantees, fail-open. Each ``executemany`` is atomic on its own (asyncpg runs it as one
pipeline in an implicit transaction), so a batch costs one round trip per shape, not two more
for BEGIN and COMMIT; nothing in the log needs two shapes to land together.

- a row the database refuses (a constraint, a value its column cannot hold) is the only one lost,
  and counted (``write_errors``);
- while the database is unreachable, or answers but takes no writes (``unwritable``: read-only,
  its disk full), nothing waits on it: rows stay queued (the batch in hand is retried with a
  growing pause), up to ``buffer_rows``; beyond, new ones are dropped, counted (``rows_dropped``)
  and logged at ERROR. Once the database answers (takes writes) again, the backlog is written.

``Health`` is shared with the session path: a connection failure seen anywhere makes requests skip
the database (serving their state from memory) for a short, growing while."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import asyncpg

from proxy.store.batch import BatchWindow, Groups, WriteOp, paced_statements
from proxy.store.dialect import POSTGRES
from proxy.store.lull import Lull, defer_for
from proxy.store.read_errors import described
from proxy.store.write_budget import BUFFER_BYTES, WriteBudget

BATCH_WINDOW_S = 0.02
MAX_BATCH = 500
RETRY_MAX_S = 2.0
CLOSE_WAIT_S = 5.0  # at shutdown, how long to wait for an unreachable database
log = logging.getLogger("ctxproxy.store")
PROBE_ANSWER_S = 1.0  # a write timed out: the database answers a trivial query in this, or is away
PROBE_S = 12.0  # the longest one caller's try of an away database keeps the others from trying

_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.TooManyConnectionsError,
)


def unanswered(exc: BaseException) -> bool:
    """A read the database did not answer: it is away, or its statement's bound passed."""
    return isinstance(exc, TimeoutError) or is_connection_error(exc)


def is_connection_error(exc: BaseException) -> bool:
    """The database is away (or going), as opposed to refusing what we sent."""
    if isinstance(exc, _CONNECTION_ERRORS):
        return True
    # a pooled connection the server ended while it was idle (the FATAL sent at shutdown) can be
    # handed out before asyncpg sees it close: "cannot switch to state …; another operation is
    # in progress"
    if isinstance(exc, asyncpg.InternalClientError) and "in progress" in str(exc):
        return True
    # asyncpg's own: "connection is closed", "pool is closing", "connection was closed in the
    # middle of operation" (its DataError, a bad argument, is an InterfaceError too)
    return (
        isinstance(exc, asyncpg.InterfaceError)
        and not isinstance(exc, ValueError)
        and "clos" in str(exc)
    )


# The server's own want, whatever is written (53000 insufficient resources, 53100 disk full,
# 53300 too many connections, 58030 an I/O error). Not its memory or a configured limit
# (53200, 53400): a batch can run out of those itself, and waited out it would hold the writer
# until close; written row by row, only the row at fault is lost.
_SERVER_WANTS = frozenset({"53000", "53100", "53300", "58000", "58030"})


def unwritable(exc: BaseException) -> bool:
    """The database answers but takes no writes for now: read-only (a standby at the primary's
    address, or a managed server set so as its disk fills), out of disk or I/O. Not the rows'
    fault: they wait for it, as for a database away."""
    if isinstance(exc, asyncpg.ReadOnlySQLTransactionError):
        return True
    state = getattr(exc, "sqlstate", None)
    return isinstance(exc, asyncpg.PostgresError) and state in _SERVER_WANTS


class Refusals:
    """The database's refusals of writes (``unwritable``), logged when they start (again after
    ``EVERY_S``) and when they end: not a line and a traceback per write."""

    EVERY_S = 60.0

    def __init__(self) -> None:
        self.since: float | None = None
        self._logged = 0.0

    def refused(self, exc: BaseException, what: str) -> None:
        now = time.monotonic()
        if self.since is None:
            self.since = now
        if self._logged == 0.0 or now - self._logged >= self.EVERY_S:
            self._logged = now
            log.error("store: PostgreSQL takes no writes (%s); %s", described(exc), what)

    def ok(self) -> None:
        if self.since is not None:
            log.warning(
                "store: PostgreSQL takes writes again after %.1f s", time.monotonic() - self.since
            )
        self.since, self._logged = None, 0.0


class Health:
    """Whether to skip the database for now; the outage logged once when it starts and ends.
    While it is away, past each wait one caller at a time tries it (``PROBE_S`` at most) and the
    others go on without it: a server that stopped answering with its connections open would
    otherwise hold every request for a connection's whole timeout."""

    def __init__(self) -> None:
        self.failures = 0
        self.down_since: float | None = None
        self._skip_until = 0.0
        self._probe_until = 0.0
        # told of each failure (the store's pool drops its idle connections: made to the same
        # server, they are as likely gone, and each would otherwise be found out by a try of its
        # own, a growing pause after the last)
        self.on_failure: Callable[[], None] | None = None

    def skip(self) -> bool:
        now = time.monotonic()
        if now < self._skip_until:
            return True
        if self.down_since is not None:  # away: this caller tries it, unless one is trying
            if now < self._probe_until:
                return True
            self._probe_until = now + PROBE_S
        return False

    def away(self) -> bool:
        """Whether the database is skipped or was found away (no caller's try is claimed)."""
        return self.down_since is not None or time.monotonic() < self._skip_until

    def failed(self, exc: BaseException) -> None:
        if self.on_failure is not None:
            self.on_failure()
        self.failures += 1
        now = time.monotonic()
        self._probe_until = 0.0
        self._skip_until = now + min(RETRY_MAX_S, 0.1 * 2 ** min(self.failures, 5))
        if self.down_since is None:
            self.down_since = now
            log.error(
                "store: PostgreSQL is unreachable (%s); requests go on without it", described(exc)
            )

    def ok(self) -> None:
        if self.down_since is not None:
            away = time.monotonic() - self.down_since
            log.warning("store: PostgreSQL answers again after %.1f s", away)
        self.failures, self.down_since, self._skip_until, self._probe_until = 0, None, 0.0, 0.0


class PgWriter:
    def __init__(
        self,
        pool: Any,
        health: Health,
        buffer_rows: int,
        batch_window_s: float = BATCH_WINDOW_S,
        lull: Lull | None = None,
        buffer_bytes: int = BUFFER_BYTES,
    ) -> None:
        self.pool = pool
        self.lull = lull or Lull()  # the requests in flight: a batch's steps wait for a lull
        self.health = health
        self.buffer_rows = buffer_rows
        self._bytes = WriteBudget(buffer_bytes)  # and by their bytes, a principal half at most
        self.batch_window_s = batch_window_s
        self._window = BatchWindow()  # closed by ``close``: what is queued is written at once
        self.write_errors = 0
        self.rows_dropped = 0
        self.refusals = Refusals()
        self._queue: asyncio.Queue[WriteOp | None] = asyncio.Queue()
        self._in_hand = 0
        self._task: asyncio.Task[None] | None = None
        self._closing_at: float | None = None
        self._last_drop_log = 0.0

    @property
    def backlog(self) -> int:
        """Writes queued or in hand, not in the database yet."""
        return self._queue.qsize() + self._in_hand

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="ctxproxy-pg-writer")

    def enqueue(self, op: WriteOp) -> None:
        if self.backlog >= self.buffer_rows or not self._bytes.take(op):
            self.rows_dropped += 1
            now = time.monotonic()
            if now - self._last_drop_log >= 10.0:
                self._last_drop_log = now
                log.error(
                    "store: %d log writes held for PostgreSQL (%d bytes), the most "
                    "store.buffer_rows and buffer_bytes allow (a principal: half the bytes); "
                    "dropping new ones (%d dropped so far)",
                    self.backlog,
                    self._bytes.held,
                    self.rows_dropped,
                )
            return
        self._queue.put_nowait(op)

    async def flush(self) -> None:
        await self._queue.join()

    async def close(self) -> None:
        if self._task is None:
            return
        self._closing_at = time.monotonic()
        self._window.close()
        await self._queue.put(None)
        await self._task
        self._task = None

    async def _run(self) -> None:
        while True:
            batch: list[WriteOp | None] = [await self._queue.get()]
            self._in_hand = 1
            if self.batch_window_s and batch[0] is not None:
                await self._window.wait(self.batch_window_s)
            while not self._queue.empty() and len(batch) < MAX_BATCH:
                batch.append(self._queue.get_nowait())
            ops = [op for op in batch if op is not None]
            self._in_hand = len(ops)
            try:
                await self._write(ops)
            except Exception:  # never let one batch stop the writer: later rows still land
                log.exception("store: a batch of %d writes failed", len(ops))
                self.write_errors += len(ops)
            finally:
                self._in_hand = 0
                for op in ops:
                    self._bytes.give_back(op)
                for _ in batch:
                    self._queue.task_done()
            if None in batch:
                return

    async def _write(self, ops: list[WriteOp]) -> None:
        # each step in a lull between requests, if one comes soon; none waited for when more
        # writes are queued behind this batch (the writer is behind: the buffer stays useful)
        pause = self.lull.pause(defer_for(ops, behind=not self._queue.empty(), shared=True))
        groups, lost = await paced_statements(ops, POSTGRES, pause=pause)
        self.write_errors += lost
        if groups:
            await pause()
            await self._write_retrying(groups)

    async def _write_retrying(self, groups: Groups) -> None:
        """Write a batch; while the database is away, retry (pausing longer each time) what is
        not written yet until it answers, or at shutdown until ``CLOSE_WAIT_S`` has passed."""
        pause = 0.05
        while True:
            try:
                await self._write_groups(groups)
                self.health.ok()
                self.refusals.ok()
                return
            except Exception as exc:
                if unwritable(exc):  # it answers: the sessions' path still reads it
                    self.refusals.refused(exc, "log writes are held until it does")
                elif not is_connection_error(exc):
                    raise
                # a write that timed out on a table someone locked (an operator's ALTER, a
                # VACUUM FULL) is not the database away: the sessions' path still has it
                elif not (isinstance(exc, TimeoutError) and await self._answers()):
                    self.health.failed(exc)
                if self._closing_at is not None and (
                    time.monotonic() - self._closing_at > CLOSE_WAIT_S
                ):
                    count = sum(len(rows) for _, rows in groups)
                    why = "took no writes" if unwritable(exc) else "stayed away"
                    log.error("store: %d log writes lost, PostgreSQL %s", count, why)
                    self.rows_dropped += count
                    return
                await asyncio.sleep(pause)
                pause = min(RETRY_MAX_S, pause * 2)

    async def _answers(self) -> bool:
        """Whether the database answers a trivial query within ``PROBE_ANSWER_S``."""
        try:
            async with self.pool.acquire(timeout=PROBE_ANSWER_S) as conn:
                await conn.fetchval("SELECT 1", timeout=PROBE_ANSWER_S)
        except Exception:
            return False
        return True

    async def _write_groups(self, groups: Groups) -> None:
        """Each group in one ``executemany`` (atomic); a group a row breaks, row by row (the
        rows refused are counted). A group is taken off ``groups`` once written, so a retry
        after the connection failed writes only the rest."""
        async with self.pool.acquire(timeout=RETRY_MAX_S * 5) as conn:
            while groups:
                sql, rows = groups[0]
                try:
                    await conn.executemany(sql, rows)
                except Exception as exc:
                    if is_connection_error(exc) or unwritable(exc):
                        raise
                    await self._write_rows(conn, sql, rows)
                del groups[0]

    async def _write_rows(self, conn: Any, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """The slow path: each row on its own; those refused are counted. The rows done are
        taken off ``rows`` even when the connection fails midway (the retry does the rest)."""
        done = 0
        try:
            for params in rows:
                try:
                    await conn.execute(sql, *params)
                except Exception as exc:
                    if is_connection_error(exc) or unwritable(exc):
                        raise
                    self.write_errors += 1
                done += 1
        finally:
            del rows[:done]
