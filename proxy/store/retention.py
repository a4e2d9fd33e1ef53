"""Data lifecycle for a long-running proxy: the retention policy (``store.retention_days`` for
request-log rows and the response ids relayed, ``store.session_ttl_days`` for idle session
state), the periodic prune that applies it, what ``ctxproxy vacuum`` runs, and the SQLite side of
a store's ``prune`` and ``ping``.

The prune never blocks a request: on SQLite each step (at most ``STEP_ROWS`` rows per statement,
one short transaction) is run by the store's writer task between two of its batches, so request
rows keep their order and the writer's single connection; the prune pauses between steps. Log
rows are large (a few KB, far more with payloads) and deleting them from a big file is slow, so
their steps shrink until one keeps the writer under ``STEP_TARGET_S``: a request row queued
meanwhile waits about that long at most.
A store (SQLite or PostgreSQL) offers ``prune(older_than, idle_before) -> counts`` and
``ping() -> bool``; this module computes the cut-offs and schedules the runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import aiosqlite


DAY_S = 86_400.0
STEP_ROWS = 500  # rows deleted per statement at most (one short transaction each)
MIN_STEP_ROWS = 20
FIRST_STEP_ROWS = 100  # log rows: the first step's size, then doubled or cut to the target
STEP_TARGET_S = 0.05  # the writer's time per step of log rows: the step size follows it
STEP_PAUSE_S = 0.01  # between two steps: the writer's own batches go first
INTERVAL_S = 3_600.0  # one prune an hour
FIRST_DELAY_S = 60.0  # the first one about a minute after start
JITTER = 0.5  # ± share of a delay: replicas started together do not prune in step
PING_TIMEOUT_S = 2.0
KEEP = 0.0  # a cut-off deleting nothing: every row's time is after it
log = logging.getLogger("ctxproxy.store")


class SQLite(Protocol):
    """What of ``proxy.store.sqlite.SQLiteStore`` the SQLite upkeep below uses (named here, not
    imported: the store imports this module)."""

    path: str
    cache_feedback: Any  # its ``forget``: the sessions' feedback held in memory let go
    _states: Any  # its ``StateCache``
    _unwritten: Any  # session id -> the save not written yet

    @property
    def reader(self) -> aiosqlite.Connection: ...

    async def in_writer(self, fn: Callable[[aiosqlite.Connection], Awaitable[Any]]) -> Any: ...


class Prunable(Protocol):
    async def prune(self, older_than: float, idle_before: float) -> dict[str, int]: ...


def cutoffs(retention_days: float, session_ttl_days: float, now: float) -> tuple[float, float]:
    """(older_than, idle_before) for ``Store.prune``; a setting of 0 keeps everything."""
    older_than = now - retention_days * DAY_S if retention_days > 0 else KEEP
    idle_before = now - session_ttl_days * DAY_S if session_ttl_days > 0 else KEEP
    return older_than, idle_before


async def prune_now(
    store: Prunable, retention_days: float, session_ttl_days: float, now: float | None = None
) -> dict[str, int]:
    """Apply the retention once; the counts of deleted rows by table."""
    older_than, idle_before = cutoffs(
        retention_days, session_ttl_days, time.time() if now is None else now
    )
    return await store.prune(older_than, idle_before)


async def run_periodically(
    store: Prunable,
    retention_days: float,
    session_ttl_days: float,
    interval_s: float | None = None,
    first_delay_s: float | None = None,
) -> None:
    """Prune shortly after start, then every ``interval_s`` (each delay jittered), for ever. A
    failed run is logged and retried at the next one."""
    interval = INTERVAL_S if interval_s is None else interval_s
    delay = FIRST_DELAY_S if first_delay_s is None else first_delay_s
    while True:
        await asyncio.sleep(delay * random.uniform(1 - JITTER, 1 + JITTER))
        delay = interval
        started = time.perf_counter()
        try:
            counts = await prune_now(store, retention_days, session_ttl_days)
        except Exception:
            log.exception("retention: the prune failed; the next one is in about %g s", delay)
            continue
        if any(counts.values()):
            took = time.perf_counter() - started
            log.info("retention: pruned %s in %.1f s", _describe(counts), took)


def start(
    store: Prunable, retention_days: float, session_ttl_days: float
) -> asyncio.Task[None] | None:
    """The periodic prune as a task (the app's lifespan owns it); None when nothing expires."""
    if retention_days <= 0 and session_ttl_days <= 0:
        return None
    return asyncio.create_task(
        run_periodically(store, retention_days, session_ttl_days), name="ctxproxy-retention"
    )


async def stop(task: asyncio.Task[None] | None) -> None:
    """Cancel the periodic prune: a step being written completes, no new one starts."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _describe(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {table} rows" for table, n in counts.items())


# ----- SQLite -----

_DELETE_REQUESTS = (
    "DELETE FROM requests WHERE rowid IN "
    "(SELECT rowid FROM requests WHERE created_at < ? ORDER BY created_at LIMIT ?)"
)
# the response ids relayed (proxy.server.response_ids) go with the log rows of their time
_DELETE_RESPONSE_IDS = (
    "DELETE FROM response_ids WHERE rowid IN "
    "(SELECT rowid FROM response_ids WHERE created_at < ? ORDER BY created_at LIMIT ?)"
)
_IDLE_SESSIONS = "SELECT id FROM sessions WHERE updated_at < ? ORDER BY updated_at LIMIT ?"
# a cache report whose session has no state row (or lost it): by its own time, in key order
_ORPHAN_CACHE = (
    "SELECT session_id FROM session_cache c WHERE c.session_id > ? AND c.at < ? "
    "AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = c.session_id) "
    "ORDER BY c.session_id LIMIT ?"
)


async def prune_sqlite(store: SQLite, older_than: float, idle_before: float) -> dict[str, int]:
    """``Store.prune`` on SQLite: bounded steps, each one transaction in the writer task."""
    counts = {"requests": 0, "sessions": 0, "session_cache": 0, "response_ids": 0}
    limit = FIRST_STEP_ROWS
    while older_than > KEEP:
        delete = partial(_delete_requests, older_than=older_than, limit=limit)
        deleted, took = await store.in_writer(delete)
        counts["requests"] += deleted
        if deleted < limit:
            break
        if took > STEP_TARGET_S:
            limit = max(MIN_STEP_ROWS, int(limit * STEP_TARGET_S / took))
        elif took < STEP_TARGET_S / 2:
            limit = min(STEP_ROWS, limit * 2)
        await asyncio.sleep(STEP_PAUSE_S)
    while older_than > KEEP:  # small rows: full steps
        ids_step = partial(_delete_response_ids, older_than=older_than)
        (deleted,) = await store.in_writer(ids_step)
        counts["response_ids"] += deleted
        if deleted < STEP_ROWS:
            break
        await asyncio.sleep(STEP_PAUSE_S)
    while idle_before > KEEP:
        step = partial(_delete_idle_sessions, store=store, idle_before=idle_before)
        selected, sessions, cached = await store.in_writer(step)
        counts["sessions"] += sessions
        counts["session_cache"] += cached
        if selected < STEP_ROWS or sessions == 0:
            break
        await asyncio.sleep(STEP_PAUSE_S)
    after = ""
    while idle_before > KEEP:
        orphans = partial(_delete_orphan_cache, store=store, idle_before=idle_before, after=after)
        after, cached = await store.in_writer(orphans)
        counts["session_cache"] += cached
        if not after:
            break
        await asyncio.sleep(STEP_PAUSE_S)
    return counts


async def _in_transaction(db: aiosqlite.Connection, statements: list[tuple[str, Any]]) -> list[int]:
    """Run the statements and commit (rolled back on any error); their row counts."""
    try:
        counts = []
        for sql, params in statements:
            cur = await db.execute(sql, params)
            counts.append(cur.rowcount)
            await cur.close()
        await db.commit()
        return counts
    except BaseException:
        with contextlib.suppress(Exception):
            await db.rollback()
        raise


async def _delete_requests(
    db: aiosqlite.Connection, older_than: float, limit: int
) -> tuple[int, float]:
    """One step: (rows deleted, seconds it took)."""
    started = time.perf_counter()
    (deleted,) = await _in_transaction(db, [(_DELETE_REQUESTS, (older_than, limit))])
    return deleted, time.perf_counter() - started


async def _delete_response_ids(db: aiosqlite.Connection, older_than: float) -> list[int]:
    return await _in_transaction(db, [(_DELETE_RESPONSE_IDS, (older_than, STEP_ROWS))])


async def _delete_idle_sessions(
    db: aiosqlite.Connection, store: SQLite, idle_before: float
) -> tuple[int, int, int]:
    """One step: (sessions selected, sessions deleted, cache reports deleted). A session with a
    save queued is not idle (its row is about to change) and stays."""
    async with db.execute(_IDLE_SESSIONS, (idle_before, STEP_ROWS)) as cur:
        selected = [row[0] for row in await cur.fetchall()]
    ids = [i for i in selected if i not in store._unwritten]
    if not ids:
        return len(selected), 0, 0
    marks = ",".join("?" * len(ids))
    cached, sessions = await _in_transaction(
        db,
        [
            (f"DELETE FROM session_cache WHERE session_id IN ({marks})", ids),
            (f"DELETE FROM sessions WHERE id IN ({marks})", ids),
        ],
    )
    _forget(store, ids)
    return len(selected), sessions, cached


async def _delete_orphan_cache(
    db: aiosqlite.Connection, store: SQLite, idle_before: float, after: str
) -> tuple[str, int]:
    """One step over cache reports without a session row; (the last key seen or "" at the end,
    rows deleted)."""
    async with db.execute(_ORPHAN_CACHE, (after, idle_before, STEP_ROWS)) as cur:
        ids = [row[0] for row in await cur.fetchall()]
    if not ids:
        return "", 0
    marks = ",".join("?" * len(ids))
    (deleted,) = await _in_transaction(
        db, [(f"DELETE FROM session_cache WHERE session_id IN ({marks})", ids)]
    )
    _forget(store, ids)
    return (ids[-1] if len(ids) == STEP_ROWS else ""), deleted


def _forget(store: SQLite, session_ids: list[str]) -> None:
    """Drop pruned sessions from the store's memory too: a session back after its TTL starts
    afresh, as it would on another replica or after a restart."""
    for session_id in session_ids:
        store._states.pop(session_id, None)
        store.cache_feedback.forget(session_id)


async def ping_sqlite(store: SQLite) -> bool:
    """The database answers a read within ``PING_TIMEOUT_S``."""
    try:
        async with asyncio.timeout(PING_TIMEOUT_S):
            async with store.reader.execute("SELECT 1") as cur:
                row = await cur.fetchone()
        return row is not None and row[0] == 1
    except Exception:
        return False


async def compact_sqlite(store: SQLite, full: bool = False, live: bool = False) -> dict[str, Any]:
    """Give freed pages back to the file system: ``PRAGMA incremental_vacuum`` on a file made
    with ``auto_vacuum=INCREMENTAL`` (new files are), else (or with ``full``) ``VACUUM``, which
    rewrites the file and converts it to incremental auto-vacuum. Then the WAL is truncated.
    ``live``: a server writes to the file, so no ``VACUUM`` (it would hold the write lock for as
    long as it rewrites, and the server's writes would be lost)."""

    async def compact(db: aiosqlite.Connection) -> dict[str, Any]:
        before = _file_bytes(store.path)
        mode = await _pragma(db, "auto_vacuum")
        freed = await _pragma(db, "freelist_count")
        if (full or mode != 2) and live:
            how = "none"  # an older file's conversion waits until no server uses it
        elif full or mode != 2:
            await db.execute("PRAGMA auto_vacuum=INCREMENTAL")  # applied by the VACUUM
            await db.execute("VACUUM")
            how = "vacuum"
        else:
            # one page per step; execute() would take one step only, executescript() runs all
            await db.executescript("PRAGMA incremental_vacuum;")
            how = "incremental_vacuum"
        async with db.execute("PRAGMA wal_checkpoint(TRUNCATE)") as cur:
            await cur.fetchall()
        return {
            "compaction": how,
            "free_pages": freed,
            "bytes_before": before,
            "bytes_after": _file_bytes(store.path),
        }

    result: dict[str, Any] = await store.in_writer(compact)
    return result


async def _pragma(db: aiosqlite.Connection, name: str) -> int:
    async with db.execute(f"PRAGMA {name}") as cur:
        row = await cur.fetchone()
    return int(row[0]) if row else 0


def _file_bytes(path: str) -> int:
    """The database's size on disk, its WAL included."""
    if path == ":memory:":
        return 0
    return sum(p.stat().st_size for p in (Path(path), Path(path + "-wal")) if p.exists())
