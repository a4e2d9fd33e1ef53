"""The SQLite store's writes (``proxy.store.sqlite``): one connection owns them, and one task
writes what requests queue (rows, session saves, statements, calls on the connection) in batches,
one transaction each, in lulls between requests. The queue is bounded by rows and bytes; a save
it does not take is held and queued again once there is room."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiosqlite

from proxy.store.batch import BatchWindow, paced_statements
from proxy.store.batch import Finish as _Finish
from proxy.store.batch import Insert as _Insert
from proxy.store.batch import SaveState as _SaveState
from proxy.store.batch import Statement as _Statement
from proxy.store.dialect import SQLITE
from proxy.store.kept_saves import KeptSaves
from proxy.store.lull import Lull, defer_for
from proxy.store.sqlite_hold import Call as _Call
from proxy.store.sqlite_locked import full, tried_again
from proxy.store.sqlite_reads import SqliteReads
from proxy.store.sqlite_rows import ROW_ERRORS, write_apart, write_rows
from proxy.store.write_budget import WriteBudget
from rules.base import SessionState

# Rows reach the database at most this long after they were queued (a crash loses at most that);
# batching them saves a commit and two thread hops per request.
BATCH_WINDOW_S = 0.02
MAX_BATCH = 500
log = logging.getLogger("ctxproxy.store")


class SqliteWrites(SqliteReads):
    """The writer connection, its queue and its task (started by the store's ``open``)."""

    def __init__(
        self,
        state_cache_size: int,
        batch_window_s: float,
        max_state_bytes: int,
        buffer_rows: int,
        buffer_bytes: int,
    ) -> None:
        # writes queued while the database is slow or locked; beyond, new ones are dropped
        self.buffer_rows, self._last_drop_log = buffer_rows, -1e9
        self._bytes = WriteBudget(buffer_bytes)  # and by their bytes, a principal half at most
        self._writer: aiosqlite.Connection | None = None
        self.max_state_bytes = max_state_bytes
        self.write_errors = 0
        # Writes as data: JSON encoding happens in the writer task, after the request that
        # queued them has been answered.
        self._queue: asyncio.Queue[_Op | _Call | None] = asyncio.Queue()
        self.batch_window_s = batch_window_s
        # The latest queued save per session, until written: the cache may evict it first.
        self._unwritten: dict[str, _SaveState] = {}
        # Saves that found the queue full (``_enqueue``): queued again by the writer once its
        # queue is at most half full. At most as many sessions as the state cache holds; past
        # that the principal holding most loses its oldest (counted: ``kept_saves``).
        self._held_saves = KeptSaves(state_cache_size, self._unwritten, self._lost_one)
        # Saves of a batch the database did not take (a row refused, the file damaged, its disk
        # full at close): kept until a later save of the session is written, as many at most
        # (counted once).
        self._failed_saves = KeptSaves(state_cache_size, self._unwritten)
        self._writer_task: asyncio.Task[None] | None = None
        # calls queued, not run yet: run while a batch waits out a full disk (the retention's
        # deletes give it room), not after it
        self._calls: list[_Call] = []
        self._window = BatchWindow()  # closed by ``close``: what is queued is written at once
        self.lull = Lull()  # the requests in flight (subscribed by the app): the writer waits

    def _start_writing(self) -> None:
        self._window = BatchWindow()  # a store opened again batches again
        self._writer_task = asyncio.create_task(self._write_loop())

    @property
    def writer(self) -> aiosqlite.Connection:
        assert self._writer is not None, "store is not open"
        return self._writer

    def _enqueue(self, op: _Op | _Call) -> None:
        """Queue a write for the single writer task: off the request's critical path, ordered,
        coalesced and committed in batches. ``flush`` waits until everything queued is written.
        Past ``buffer_rows`` queued (the database locked for long), or their bytes past
        ``buffer_bytes`` (``write_budget``), a write is dropped and counted; a call run in the
        writer never is (it is awaited), and a session's save is held and queued again once
        there is room (``_held_saves``)."""
        full = self._queue.qsize() >= self.buffer_rows
        if not isinstance(op, _Call) and (full or not self._bytes.take(op)):
            if isinstance(op, _SaveState):
                self._hold(op)  # a session's latest state: queued again once there is room
            else:
                self.write_errors += 1
            if (now := time.monotonic()) - self._last_drop_log >= 10.0:
                self._last_drop_log = now
                said = "store: %d writes queued (%d bytes), the most store.buffer_rows and "
                said += "buffer_bytes allow (a principal: half the bytes); dropping new ones"
                log.error(said + " (%d lost so far)", self._queue.qsize(), self._bytes.held,
                          self.write_errors)  # fmt: skip
            return
        if isinstance(op, _SaveState) and len(self._held_saves):
            self._held_saves.drop(op.session_id)  # this later save is queued instead
        self._queue.put_nowait(op)

    def _hold(self, save: _SaveState) -> None:
        """Hold a save the full queue did not take (``_held_saves``)."""
        self._held_saves.keep(save)

    def _lost_one(self) -> None:
        self.write_errors += 1

    def _queue_held(self, all_of_them: bool = False) -> None:
        """Queue the held saves again, oldest first, while the queue is at most half full (or
        all of them): each one unless a later save of its session was queued since."""
        held = self._held_saves
        while len(held) and (all_of_them or self._queue.qsize() <= self.buffer_rows // 2):
            save = held.oldest()
            if save is not None and self._unwritten.get(save.session_id) is save:
                self._queue.put_nowait(save)

    def write_later(
        self, sql: str, params: tuple[Any, ...], key: str | None = None, order: float = 0.0
    ) -> None:
        """Queue one statement of ours (fixed SQL, bound values) for the writer task, written in
        the next batch after the request log and session rows (with a ``key``: only the one of
        greatest ``order`` among the batch's with that SQL and key, an upsert of one row)."""
        self._enqueue(_Statement(sql, params, key, order))

    async def flush(self) -> None:
        await self._queue.join()

    async def in_writer(self, fn: Callable[[aiosqlite.Connection], Awaitable[Any]]) -> Any:
        """``fn(connection)`` run by the writer task between two batches; its result."""
        if self._writer_task is None or self._writer_task.done():
            raise RuntimeError("store is not open")
        call = _Call(fn, asyncio.get_running_loop().create_future())
        self._calls.append(call)
        self._enqueue(call)
        return await call.done

    async def _write_loop(self) -> None:
        closing = False
        while True:
            batch: list[_Op | _Call | None] = [await self._queue.get()]
            if self.batch_window_s and batch[0] is not None:
                # gather what the next few ms bring: a request's insert, its finish and its
                # session's state then land in one statement each, and one commit serves all
                await self._window.wait(self.batch_window_s)
            while not self._queue.empty() and len(batch) < MAX_BATCH:
                batch.append(self._queue.get_nowait())
            closing = closing or None in batch
            ops = [op for op in batch if op is not None and not isinstance(op, _Call)]
            written = False
            try:
                written = await self._write_batch(ops)
            except Exception:  # never let one batch stop the writer: later rows still land
                log.exception("store: a batch of %d writes failed", len(ops))
                self.write_errors += len(ops)
            finally:
                for op in ops:
                    if isinstance(op, _SaveState) and self._unwritten.get(op.session_id) is op:
                        self._saved(op, written)
                for call in batch:  # after the batch, on the writer's connection (retention)
                    if isinstance(call, _Call):
                        await self._run_call(call)
                # before the batch is done: ``flush`` waits for the saves queued again too
                self._queue_held(all_of_them=closing)
                for op in ops:
                    self._bytes.give_back(op)
                for _ in batch:
                    self._queue.task_done()
            if closing and self._queue.empty():
                return

    async def _run_call(self, call: _Call) -> None:
        if call in self._calls:
            self._calls.remove(call)
            await call.run(self.writer)

    def _saved(self, save: _SaveState, written: bool) -> None:
        """``save``, its session's latest, was ``written`` by its batch (or not: kept readable,
        ``_failed_saves``, however many sessions the state cache takes in meanwhile)."""
        if written:
            self._failed_saves.drop(save.session_id)
            del self._unwritten[save.session_id]
        else:
            self._failed_saves.keep(save)

    async def _write_batch(self, ops: list[_Op]) -> bool:
        """Write a batch in one transaction, one statement per shape; if a row breaks (a
        constraint, a value SQLite refuses), the batch is redone row by row so only that row is
        lost. A lock held by another process is waited for (``sqlite_locked``). Whether every
        write was written (else which were is not told)."""
        # each step in a lull between requests, if one comes soon; none waited for when more
        # writes are queued behind this batch (the writer is behind: the queue stays bounded)
        pause = self.lull.pause(defer_for(ops, behind=not self._queue.empty()))
        groups, lost = await paced_statements(
            ops, SQLITE, self.max_state_bytes, self._written, pause=pause
        )
        self.write_errors += lost
        if not groups:
            return not lost
        attempt = 0
        while True:
            try:
                try:
                    # each statement, and the commit, begun in a lull: the connection's thread
                    # takes a core and the interpreter's lock (to bind each row, and after each
                    # row's step), so what overlaps a request slows it; one transaction still
                    for sql, rows in groups:
                        await pause()
                        await self.writer.executemany(sql, rows)
                    failed = 0
                except ROW_ERRORS:
                    await self.writer.rollback()
                    failed = await write_rows(self.writer, groups)
                await pause()
                await self.writer.commit()
                self.write_errors += failed
                return not (failed or lost)
            except aiosqlite.OperationalError as exc:  # "database is locked" past busy_timeout
                with contextlib.suppress(aiosqlite.Error):
                    await self.writer.rollback()
                # a table gone, a damaged file: waiting mends nothing (a full disk, freed, does)
                if SQLITE.unreadable(exc) and not full(exc):
                    apart = await write_apart(self.writer, groups)
                    self.write_errors += apart
                    return not (apart or lost)
                attempt += 1
                count, closing = sum(len(rows) for _, rows in groups), self._writer_task is None
                if full(exc):  # what frees room (the retention) is queued behind this batch
                    for call in list(self._calls):
                        await self._run_call(call)
                if not await tried_again(attempt, exc, closing, count, self._queue.qsize()):
                    break
        log.error("store: %d writes lost, the database could not be written", count)
        self.write_errors += count
        return False

    @property
    def backlog(self) -> int:
        """Writes queued, not in the database yet."""
        return self._queue.qsize()

    def _written(
        self, session_id: str, state: SessionState, stored: SessionState, json_bytes: int
    ) -> None:
        """The writer stored ``state`` (as ``stored``): the store's state cache learns it."""
        raise NotImplementedError


_Op = _Insert | _Finish | _SaveState | _Statement
