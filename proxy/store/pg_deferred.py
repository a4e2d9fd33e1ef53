"""The PostgreSQL store's saves that wait for their request's answer to go out.

A session's save (upsert, commit, unlock) waits until the request's log row is finished, at most
``SAVE_DEFER_S``: with an upstream that answers at once it would otherwise run during the relay of
the answer, and where the database shares the proxy's cores its backend takes one the relay needs
(measured on 2 shared cores, 20 messages: the upstream call's p50 took 0.23 ms longer with the save
in it, 0.03 ms longer now); an upstream slower than that hides the save as it did before. The
store starts a waiting save at once whenever something needs the session (``go``, ``go_all``)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable

# How long a save may wait for its request's answer to go out (the session stays held meanwhile):
# about what a local upstream that answers at once takes; a slower one's wait hides the save.
SAVE_DEFER_S = 0.002
MAX_ANSWERING = 10_000  # request ids remembered whose rows are not finished yet


class DeferredSaves:
    """By session: the save waiting to start (its go), the save under way (its task); by request
    id: the session whose save waits for that request's row to be finished."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[None]] = {}
        self._answering: dict[str, str] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, session_id: str, save: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """Run ``save`` once the session's answer is out (or ``SAVE_DEFER_S`` has passed, or
        something asked for it): the task doing so."""
        go = asyncio.get_running_loop().create_future()
        self._waiting[session_id] = go
        task = asyncio.create_task(self._run(session_id, go, save))
        self._tasks[session_id] = task
        task.add_done_callback(functools.partial(self._ended, session_id))
        return task

    async def _run(
        self, session_id: str, go: asyncio.Future[None], save: Callable[[], Awaitable[None]]
    ) -> None:
        timer = asyncio.get_running_loop().call_later(SAVE_DEFER_S, self.go, session_id)
        cancelled = False
        try:
            await go
        except asyncio.CancelledError:  # the loop is ending: save all the same, then stop
            cancelled = True
        finally:
            timer.cancel()
            if self._waiting.get(session_id) is go:
                del self._waiting[session_id]
        await save()
        if cancelled:
            raise asyncio.CancelledError

    def _ended(self, session_id: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(session_id) is task:
            del self._tasks[session_id]

    def task_of(self, session_id: str) -> asyncio.Task[None] | None:
        """The session's save under way (waiting or running), if any."""
        return self._tasks.get(session_id)

    def go(self, session_id: str) -> None:
        """Start the session's save if it waits."""
        go = self._waiting.pop(session_id, None)
        if go is not None and not go.done():
            go.set_result(None)

    def go_all(self) -> None:
        for session_id in list(self._waiting):
            self.go(session_id)

    def answering(self, request_id: str, session_id: str | None) -> None:
        """A request's row was queued: its session's save, waiting now or handed over later (the
        server starts the upstream call before the save), starts once the row is finished."""
        if session_id is None:  # its save may start after the row is queued (forward first)
            return
        if len(self._answering) >= MAX_ANSWERING:  # rows never finished: forget the oldest
            del self._answering[next(iter(self._answering))]
        self._answering[request_id] = session_id

    def answered(self, request_id: str) -> None:
        """The request's answer is out (or failed): its session's save now."""
        session_id = self._answering.pop(request_id, None)
        if session_id is not None:
            self.go(session_id)
