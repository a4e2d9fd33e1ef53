"""The engine on PostgreSQL runs the pipeline on the state this replica last held while the
session's hold travels to the database (``Store.known_state``). The outcome is used only when the
hold finds that very state still stored; when another replica wrote in between, the pipeline runs
again on what it wrote. Either way the result is the one a single store gives, and nothing is
left held when the pipeline fails."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from proxy.rewrite.engine import Engine, Rewritten
from proxy.settings import load_settings
from proxy.store.pg_session import session_lock_key
from proxy.store.postgres import PostgresStore
from proxy.store.sqlite import SQLiteStore
from rules.base import SessionState
from tests.support.factories import assistant, request, result, shell, user
from tests.support.postgres import PgServer, advisory_locks


def step(k: int) -> dict[str, Any]:
    """The k-th request of one growing conversation: each turn makes a folder."""
    messages = [user("make the build folders")]
    for i in range(k + 1):
        call = f"c{i}"
        messages += [
            assistant(None, shell(call, f"mkdir /tmp/build-{i}")),
            result(call, "[Command finished with exit code 0]"),
        ]
    return request(*messages)


class Counted:
    """An engine on a PostgreSQL store whose pipeline runs are counted, and the order of each
    run and of the store's holds noted (both are the real ones, only watched)."""

    def __init__(self, engine: Engine, store: PostgresStore) -> None:
        self.engine, self.runs, self.events = engine, 0, list[str]()
        run, hold = engine.pipeline.run, store._hold

        def counting(*args: Any) -> Any:
            self.runs += 1
            self.events.append("run")
            return run(*args)

        async def holding(session_id: str, *args: Any) -> Any:
            held = await hold(session_id, *args)
            self.events.append("held")
            return held

        engine.pipeline.run = counting  # type: ignore[method-assign]
        store._hold = holding  # type: ignore[method-assign]

    async def rewrite(self, k: int, now: float, **extra: Any) -> Rewritten:
        self.runs, self.events = 0, []
        return await self.engine.rewrite(step(k), {}, now=now, session_id="s", **extra)


@pytest.fixture
async def replicas(pg_server: PgServer) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    url = pg_server.database()
    a, b = PostgresStore(url, batch_window_s=0.0), PostgresStore(url, batch_window_s=0.0)
    await a.open()
    await b.open()
    yield a, b
    await a.close()
    await b.close()


async def reference(tmp_path: Path, steps: list[tuple[int, float]]) -> list[Rewritten]:
    """The same requests through one SQLite store, one after the other."""
    store = SQLiteStore(str(tmp_path / "ref.db"), batch_window_s=0.0)
    await store.open()
    try:
        engine = Engine(load_settings(None), store, strict=True)
        return [await engine.rewrite(step(k), {}, now=t, session_id="s") for k, t in steps]
    finally:
        await store.close()


def entities(state: SessionState) -> list[str]:
    return sorted(e["path"] for e in state.get("entities") or [])


async def test_a_current_state_is_used_as_run_ahead(
    replicas: tuple[PostgresStore, PostgresStore], tmp_path: Path
) -> None:
    a, _ = replicas
    engine = Counted(Engine(load_settings(None), a, strict=True), a)
    steps = [(0, 10.0), (1, 20.0), (2, 30.0)]
    got = []
    for k, t in steps:
        got.append(await engine.rewrite(k, t))
        await a.flush()  # the save is done before the next request (as a client's turn allows)
        # the first request waits for its hold; from the second on, the replica knows the
        # state and runs the pipeline while the hold travels, once
        assert engine.events == (["held", "run"] if k == 0 else ["run", "held"])
    want = await reference(tmp_path, steps)
    assert [r.body for r in got] == [r.body for r in want]
    state, _ = await a.load_state("anonymous/s")
    assert entities(state) == ["/tmp/build-0", "/tmp/build-1", "/tmp/build-2"]


async def test_another_replicas_write_makes_the_pipeline_run_again_on_it(
    replicas: tuple[PostgresStore, PostgresStore], tmp_path: Path
) -> None:
    a, b = replicas
    on_a = Counted(Engine(load_settings(None), a, strict=True), a)
    on_b = Counted(Engine(load_settings(None), b, strict=True), b)
    await on_a.rewrite(0, 10.0)
    await a.flush()
    await on_b.rewrite(1, 20.0)  # a's cached state is now an old version
    await b.flush()
    assert a.known_state("anonymous/s") is not None
    third = await on_a.rewrite(2, 30.0)
    await a.flush()
    assert on_a.events == ["run", "held", "run"]  # ahead on the old state, then on b's
    want = await reference(tmp_path, [(0, 10.0), (1, 20.0), (2, 30.0)])
    assert third.body == want[-1].body
    assert third.report["references"] == want[-1].report["references"]
    state, _ = await b.load_state("anonymous/s")
    assert entities(state) == ["/tmp/build-0", "/tmp/build-1", "/tmp/build-2"]


async def test_no_run_ahead_for_a_sub_agent_or_a_session_in_use(
    replicas: tuple[PostgresStore, PostgresStore],
) -> None:
    a, _ = replicas
    engine = Counted(Engine(load_settings(None), a, strict=True), a)
    await engine.rewrite(0, 10.0)
    await a.flush()
    assert a.known_state("anonymous/s") is not None
    await a.locks.acquire("anonymous/s")  # another request of the session is under way here
    try:
        assert a.known_state("anonymous/s") is None
    finally:
        a.locks.release("anonymous/s")
    engine.events = []
    await engine.engine.rewrite(step(1), {}, now=20.0, session_id="child", parent_session_id="s")
    await a.flush()
    assert engine.events == ["held", "run"]  # its ancestors are read under the hold
    assert a.known_state("child") is None


@pytest.mark.parametrize("fails", ["pipeline", "cancelled"])
async def test_a_run_ahead_that_fails_lets_the_session_go(
    replicas: tuple[PostgresStore, PostgresStore], fails: str
) -> None:
    a, _ = replicas
    engine = Engine(load_settings(None), a, strict=True)
    await engine.rewrite(step(0), {}, now=10.0, session_id="s")
    await a.flush()
    before, _ = await a.load_state("anonymous/s")
    run = engine.pipeline.run
    stop: Callable[..., Any]
    if fails == "pipeline":

        def stop(*args: Any) -> Any:
            raise RuntimeError("a rule's bug")

        engine.pipeline.run = stop  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            await engine.rewrite(step(1), {}, now=20.0, session_id="s")
    else:  # the request is cancelled (a client gone) while the hold travels
        task = asyncio.ensure_future(engine.rewrite(step(1), {}, now=20.0, session_id="s"))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    engine.pipeline.run = run  # type: ignore[method-assign]
    await a.flush()
    assert len(a.locks) == 0
    url = a.url
    for _ in range(50):  # a connection that may have held the lock is closed, not pooled
        if await advisory_locks(url) == 0:
            break
        await asyncio.sleep(0.02)
    assert await advisory_locks(url) == 0
    assert entities((await a.load_state("anonymous/s"))[0]) == entities(before)
    done = await engine.rewrite(step(1), {}, now=30.0, session_id="s")  # the session goes on
    assert done.body["messages"]


async def test_no_run_ahead_while_the_sessions_requests_alternate_between_replicas(
    replicas: tuple[PostgresStore, PostgresStore], tmp_path: Path
) -> None:
    """A round-robin balancer: each replica's cached state is old at every request, so running
    ahead would only run the pipeline twice. After one miss a replica waits for the hold, until
    a hold finds its own state current again."""
    a, b = replicas
    on = {"a": Counted(Engine(load_settings(None), a, strict=True), a)}
    on["b"] = Counted(Engine(load_settings(None), b, strict=True), b)
    stores = {"a": a, "b": b}
    served = ["a", "b", "a", "b", "a", "a", "a"]
    events = []
    for k, name in enumerate(served):
        last = await on[name].rewrite(k, 10.0 * (k + 1))
        await stores[name].flush()
        events.append(on[name].events)
    assert events == [
        ["held", "run"],  # a: new session
        ["held", "run"],  # b: new here
        ["run", "held", "run"],  # a: ran ahead on its own old state, then on b's: a miss
        ["run", "held", "run"],  # b: the same
        ["held", "run"],  # a: no running ahead after a miss (the hold finds b's write again)
        ["held", "run"],  # a: the hold finds a's own state current: a hit
        ["run", "held"],  # a: running ahead again, and kept
    ]
    want = await reference(tmp_path, [(k, 10.0 * (k + 1)) for k in range(len(served))])
    assert last.body == want[-1].body


async def test_runs_ahead_on_the_state_the_last_request_is_still_saving(
    replicas: tuple[PostgresStore, PostgresStore], tmp_path: Path
) -> None:
    """An agent's next request often comes before the last one's save is done (the save goes on
    after forwarding): the state being saved is the one the hold will find."""
    a, _ = replicas
    engine = Counted(Engine(load_settings(None), a, strict=True), a)
    steps = [(k, 10.0 * (k + 1)) for k in range(4)]
    got, events = [], []
    for k, t in steps:  # no flush in between: each save may still be under way
        got.append(await engine.rewrite(k, t))
        events.append(engine.events)
    assert events == [["held", "run"]] + [["run", "held"]] * 3
    want = await reference(tmp_path, steps)
    assert [r.body for r in got] == [r.body for r in want]
    await a.flush()
    assert entities((await a.load_state("anonymous/s"))[0]) == [f"/tmp/build-{k}" for k in range(4)]


async def test_a_failed_run_ahead_does_not_wait_for_a_lock_held_elsewhere(
    replicas: tuple[PostgresStore, PostgresStore],
) -> None:
    """The pipeline fails while another connection holds the session (lock_timeout_s is 10 s):
    the error comes at once, the hold is called off, and nothing stays held here."""
    a, _ = replicas
    engine = Engine(load_settings(None), a, strict=True)
    await engine.rewrite(step(0), {}, now=10.0, session_id="s")
    await a.flush()
    other = await asyncpg.connect(a.url)
    try:
        await other.execute("SELECT pg_advisory_lock($1)", session_lock_key("anonymous/s"))
        run = engine.pipeline.run

        def stop(*args: Any) -> Any:
            raise RuntimeError("a rule's bug")

        engine.pipeline.run = stop  # type: ignore[method-assign]
        started = time.monotonic()
        with pytest.raises(RuntimeError):
            await engine.rewrite(step(1), {}, now=20.0, session_id="s")
        assert time.monotonic() - started < 2.0
        engine.pipeline.run = run  # type: ignore[method-assign]
        assert len(a.locks) == 0
    finally:
        await other.close()  # lets its lock go
    done = await engine.rewrite(step(1), {}, now=30.0, session_id="s")
    assert done.body["messages"]
