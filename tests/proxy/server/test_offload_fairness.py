"""The offload workers are shared fairly between principals (``proxy.rewrite.offload``): each
principal runs one job at a time, in its order, so another tenant's job takes a free worker
rather than queueing behind a stream of one tenant's heavy bodies, and waiting principals take a
free worker in turn. Each job runs in a copy of its request's context (its memo scope), a job
whose request went away before its turn never runs, and a job's exception reaches its request."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import Any

import pytest

from proxy.rewrite.offload import Offload
from rules.memo_scope import enter_scope, memo_scope


def as_principal(principal: str, coro: Callable[[], Any]) -> asyncio.Task[Any]:
    """A task for ``coro()`` as a request of ``principal`` runs it."""
    context = contextvars.copy_context()
    context.run(enter_scope, principal)
    return asyncio.get_running_loop().create_task(coro(), context=context)


async def settle() -> None:
    """Let the tasks created so far queue their jobs."""
    for _ in range(5):
        await asyncio.sleep(0)


async def running(started: threading.Event) -> None:
    """Wait until the worker has taken the job that sets ``started``."""
    assert await asyncio.to_thread(started.wait, 5)


async def test_another_principal_s_job_runs_while_one_holds_a_worker() -> None:
    offload = Offload()
    ran: list[str] = []
    gate, started = threading.Event(), threading.Event()

    def job(name: str) -> str:
        if name == "a0":
            started.set()
            gate.wait(5)  # a long step of A's (a pipeline run of a large body)
        ran.append(name)
        return name

    try:
        first = as_principal("pt-a", lambda: offload.run(job, "a0"))
        await running(started)
        rest = [as_principal("pt-a", lambda i=i: offload.run(job, f"a{i}")) for i in range(1, 6)]
        other = as_principal("pt-b", lambda: offload.run(job, "b0"))
        assert await asyncio.wait_for(other, 5) == "b0"  # while a0 still runs
        assert ran == ["b0"]
        assert offload.queued() == {"pt-a": 5}  # A's own jobs: one at a time, in order
        gate.set()
        assert await asyncio.gather(first, *rest) == [f"a{i}" for i in range(6)]
        assert ran == ["b0"] + [f"a{i}" for i in range(6)]
    finally:
        gate.set()
        offload.close()


async def test_waiting_principals_take_a_free_worker_in_turn() -> None:
    offload = Offload(workers=1)
    ran: list[str] = []
    gate, started = threading.Event(), threading.Event()

    def job(name: str) -> None:
        if name == "a0":
            started.set()
            gate.wait(5)
        ran.append(name)

    try:
        first = as_principal("pt-a", lambda: offload.run(job, "a0"))
        await running(started)
        queued = [
            as_principal(p, lambda p=p, n=n: offload.run(job, n))
            for p, n in (("pt-a", "a1"), ("pt-a", "a2"), ("pt-a", "a3"), ("pt-b", "b0"))
        ]
        queued.append(as_principal("pt-c", lambda: offload.run(job, "c0")))
        await settle()
        assert offload.queued() == {"pt-a": 3, "pt-b": 1, "pt-c": 1}
        gate.set()
        await asyncio.gather(first, *queued)
        # A queued first, so its next job goes first; then B's and C's, before A's others
        assert ran == ["a0", "a1", "b0", "c0", "a2", "a3"]
    finally:
        gate.set()
        offload.close()


async def test_each_principal_s_jobs_keep_their_order() -> None:
    offload = Offload()
    ran: list[str] = []
    gate = threading.Event()

    def job(name: str) -> None:
        gate.wait(5)
        ran.append(name)

    try:
        tasks = [
            as_principal(p, lambda p=p, i=i: offload.run(job, f"{p}{i}"))
            for i in range(4)
            for p in ("a", "b", "c")
        ]
        await settle()
        gate.set()
        await asyncio.gather(*tasks)
        for p in "abc":
            assert [n for n in ran if n[0] == p] == [f"{p}{i}" for i in range(4)]
    finally:
        gate.set()
        offload.close()


async def test_a_job_runs_in_its_request_s_context() -> None:
    offload = Offload()
    try:
        task = as_principal("pt-carol", lambda: offload.run(memo_scope))
        assert await task == "pt-carol"
        assert await offload.run(memo_scope) == ""  # outside a request
    finally:
        offload.close()


async def test_a_job_whose_request_went_away_never_runs() -> None:
    offload = Offload(workers=1)  # the next job waits for the running one
    ran: list[str] = []
    gate, started = threading.Event(), threading.Event()

    def job(name: str) -> None:
        if name == "first":
            started.set()
            gate.wait(5)
        ran.append(name)

    try:
        first = as_principal("pt-a", lambda: offload.run(job, "first"))
        await running(started)
        gone = as_principal("pt-b", lambda: offload.run(job, "gone"))
        after = as_principal("pt-c", lambda: offload.run(job, "after"))
        await settle()
        gone.cancel()  # the client disconnected while its job waited
        await settle()
        gate.set()
        await asyncio.gather(first, after)
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert ran == ["first", "after"]
    finally:
        gate.set()
        offload.close()


async def test_a_job_s_exception_reaches_its_request() -> None:
    offload = Offload()

    def fails() -> None:
        raise ValueError("a body the parser refused")

    try:
        with pytest.raises(ValueError, match="the parser refused"):
            await offload.run(fails)
        assert await offload.run(lambda: 42) == 42  # the worker goes on
    finally:
        offload.close()


async def test_closing_cancels_what_still_waits() -> None:
    offload = Offload(workers=1)  # the next job waits for the running one
    gate, started = threading.Event(), threading.Event()

    def job() -> bool:
        started.set()
        return gate.wait(5)

    try:
        busy = as_principal("pt-a", lambda: offload.run(job))
        await running(started)
        waiting = as_principal("pt-b", lambda: offload.run(lambda: "never"))
        await settle()
        offload.close()
        gate.set()
        assert await busy is True  # the running job finishes
        with pytest.raises(asyncio.CancelledError):
            await waiting
        with pytest.raises(RuntimeError, match="closed"):
            await offload.run(lambda: None)
    finally:
        gate.set()
        offload.close()


async def test_a_job_whose_request_went_away_stops_at_its_next_check() -> None:
    """A request cancelled while its job runs (its client hung up) stops at the job's next
    ``rules.abandon.check``: the work after it, nobody would read, is not done."""
    from rules import abandon

    offload = Offload()
    gate, started, stopped = threading.Event(), threading.Event(), threading.Event()
    done: list[int] = []

    def job() -> None:
        started.set()
        gate.wait(5)
        try:
            for i in range(1000):
                abandon.check()
                done.append(i)
        except abandon.Abandoned:
            stopped.set()
            raise

    try:
        task = as_principal("pt-a", lambda: offload.run(job))
        await running(started)
        task.cancel()
        await settle()
        gate.set()
        assert await asyncio.to_thread(stopped.wait, 5)
        assert done == []
        with pytest.raises(asyncio.CancelledError):
            await task
        abandon.check()  # outside a worker's job: nothing is watched
    finally:
        offload.close()
