"""The writer works between requests: once its batch window has passed, a batch waits while a
request is being handled (the app's observers tell the store's ``lull``), is written as soon as
none is, and never waits longer than ``MAX_DEFER_S`` however busy the server stays."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

from proxy.app import create_app
from proxy.store.lull import MAX_DEFER_S, Lull
from proxy.store.sqlite import Store
from rules.base import SessionState
from tests.conftest import proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import request, user


async def test_a_pause_waits_for_the_requests_in_flight_and_no_longer_than_its_deadline() -> None:
    lull = Lull()
    lull.started()
    lull.started()
    waiting = asyncio.ensure_future(lull.pause(5.0)())
    await asyncio.sleep(0.05)
    lull.finished({})
    await asyncio.sleep(0.05)
    assert not waiting.done()  # one request still open
    lull.finished({})
    await asyncio.wait_for(waiting, 1.0)
    lull.started()  # a request that never ends: the deadline stands
    began = time.monotonic()
    await lull.pause(0.1)()
    assert 0.05 < time.monotonic() - began < 1.0
    lull.finished({})
    lull.finished({})  # heard once too often: still none open, no wait
    began = time.monotonic()
    await lull.pause(5.0)()
    assert lull.open == 0 and time.monotonic() - began < 0.5


async def test_a_pause_woken_by_a_lull_a_request_ended_waits_again_if_the_next_began() -> None:
    """A client at concurrency 1 sends its next request as soon as it has its answer: that
    request may begin between the lull and the waiter's turn; the pause goes on waiting."""
    lull = Lull()
    lull.started()
    waiting = asyncio.ensure_future(lull.pause(5.0)())
    await asyncio.sleep(0.02)
    lull.finished({})  # the waiter is woken, not run yet
    lull.started()  # the next request begins first
    await asyncio.sleep(0.05)
    assert not waiting.done()
    lull.finished({})
    await asyncio.wait_for(waiting, 1.0)
    lull.started()  # and the deadline still stands across the wake-ups
    waiting = asyncio.ensure_future(lull.pause(0.1)())
    began = time.monotonic()
    for _ in range(5):
        await asyncio.sleep(0.01)
        lull.finished({})
        lull.started()
    await asyncio.wait_for(waiting, 1.0)
    assert 0.08 < time.monotonic() - began < 1.0
    lull.finished({})


async def test_a_batch_waits_for_the_request_being_handled_then_lands(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "db"), batch_window_s=0.01)
    await store.open()
    try:
        store.lull.started()
        await store.insert_request({"id": "r1", "created_at": 1.0, "model": "m", "report": {}})
        await asyncio.sleep(MAX_DEFER_S / 4)  # past the batch window, within the deferral
        assert await store.get_request("r1") is None  # taken off the queue, not written
        store.lull.finished({})
        await asyncio.wait_for(store.flush(), 2.0)
        assert (await store.get_request("r1") or {}).get("model") == "m"
        store.lull.started()  # a server never idle: each batch waits its deadline, no longer
        began = time.monotonic()
        await store.insert_request({"id": "r2", "created_at": 2.0, "model": "m", "report": {}})
        await asyncio.wait_for(store.flush(), 5 * MAX_DEFER_S)
        assert time.monotonic() - began >= MAX_DEFER_S * 0.9
        assert await store.get_request("r2") is not None
    finally:
        await store.close()


async def test_a_request_s_row_and_its_cache_report_wait_for_the_lull(tmp_path: Path) -> None:
    """Every request queues its row, its session's state and its cache report (a keyed
    statement): such a batch waits while a request is being handled, as the rows alone do."""
    from proxy.store.cache_feedback import CacheFeedback

    store = Store(str(tmp_path / "db"), batch_window_s=0.01)
    await store.open()
    try:
        store.lull.started()
        await store.insert_request({"id": "r1", "created_at": 1.0, "model": "m", "report": {}})
        store.cache_feedback.put("s1", CacheFeedback(1.0, 100, 80, 0))
        await asyncio.sleep(MAX_DEFER_S / 4)  # past the batch window, within the deferral
        assert await store.get_request("r1") is None
        select = store.dialect.feedback_select
        assert await store.fetchrow(select, ("s1",)) is None
        store.lull.finished({})
        await asyncio.wait_for(store.flush(), 2.0)
        assert await store.get_request("r1") is not None
        assert tuple((await store.fetchrow(select, ("s1",)))[1:3]) == (100, 80)
    finally:
        await store.close()


async def test_each_statement_of_a_batch_and_its_commit_begin_in_a_lull(tmp_path: Path) -> None:
    """A request that begins while the batch's first statement runs holds the next statement,
    and the commit, until it ends: nothing of the batch is read before."""
    store = Store(str(tmp_path / "db"), batch_window_s=0.01)
    await store.open()
    sent: list[str] = []
    executemany = store.writer.executemany

    def counted(sql: str, rows: list[tuple[object, ...]]) -> object:
        sent.append(sql.split("(")[0].strip())
        if len(sent) == 1:
            store.lull.started()  # a request begins while the first statement runs
        return executemany(sql, rows)

    store.writer.executemany = counted  # type: ignore[method-assign]
    try:
        await store.insert_request({"id": "r1", "created_at": 1.0, "model": "m", "report": {}})
        await store.save_state("s1", SessionState({"k": 1}), None)
        await asyncio.sleep(MAX_DEFER_S / 2)
        assert sent == ["INSERT INTO requests"]
        assert await store.get_request("r1") is None  # not committed
        store.lull.finished({})
        await asyncio.wait_for(store.flush(), 2.0)
        assert sent == ["INSERT INTO requests", "INSERT INTO sessions"]
        assert await store.get_request("r1") is not None
    finally:
        await store.close()


async def test_a_writer_behind_its_queue_does_not_wait(tmp_path: Path) -> None:
    """More writes queued than one batch takes: the batch is written at once, request or not;
    the last one, with nothing behind it, waits for its lull again."""
    from proxy.store.sqlite import MAX_BATCH

    store = Store(str(tmp_path / "db"), batch_window_s=0.01)
    await store.open()
    try:
        store.lull.started()
        for k in range(MAX_BATCH + 100):
            await store.insert_request({"id": f"r{k}", "created_at": 1.0, "model": "m"})
        await asyncio.sleep(MAX_DEFER_S / 2)
        written = (await store.fetchrow("SELECT count(*) FROM requests", ()))[0]
        assert written == MAX_BATCH  # the first batch at once, the rest waiting for a lull
        store.lull.finished({})
        await asyncio.wait_for(store.flush(), 2.0)
        assert (await store.fetchrow("SELECT count(*) FROM requests", ()))[0] == MAX_BATCH + 100
    finally:
        await store.close()


async def test_the_app_tells_the_store_of_each_request(tmp_path: Path) -> None:
    """Served through the app: the lull hears every request start and finish (none left open),
    and the rows land."""
    upstream = EdgeUpstream().start()
    upstream.reply = Reply.json(
        {"id": "c1", "object": "chat.completion", "choices": [{"index": 0,
         "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]}
    )  # fmt: skip
    try:
        app = create_app(proxy_settings(upstream.base_url), db_path=str(tmp_path / "db"))
        async with app.router.lifespan_context(app):
            store = app.state.services.store
            heard: list[int] = []
            started = store.lull.started
            store.lull.started = lambda: (started(), heard.append(store.lull.open))[0]
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
                for _ in range(3):
                    answer = await client.post(
                        "/v1/chat/completions",
                        json=request(user("hello")),
                        headers={"x-session-id": "lull"},
                    )
                    assert answer.status_code == 200
            assert heard == [1, 1, 1] and store.lull.open == 0
            await asyncio.wait_for(store.flush(), 2.0)
            rows = await store.list_requests()
            assert len(rows) == 3
    finally:
        upstream.stop()


async def test_a_statement_is_written_at_once_while_a_request_is_in_flight(tmp_path: Path) -> None:
    """A statement (a relayed response id another replica looks up within its short retry) is not
    held for a lull, nor is a batch with nothing to write; request rows still are."""
    from proxy.store.batch import Statement
    from proxy.store.lull import defer_for

    assert defer_for([], behind=False) == 0.0
    assert defer_for([Statement("SELECT 1", ())], behind=False) == 0.0
    # a session's cache report (keyed: its newest wins) is queued by every request: it waits
    # with the rows, else no batch would
    keyed = Statement("SELECT 1", (), key="s", order=1.0)
    assert defer_for([object(), keyed], behind=False) == MAX_DEFER_S
    assert defer_for([keyed, Statement("SELECT 1", ())], behind=False) == 0.0
    # other replicas read a session's report with its state, saved at once: it does not wait
    assert defer_for([object(), keyed], behind=False, shared=True) == 0.0
    assert defer_for([object()], behind=False, shared=True) == MAX_DEFER_S
    assert defer_for([object()], behind=True) == 0.0
    assert defer_for([object()], behind=False) == MAX_DEFER_S
    store = Store(str(tmp_path / "db"), batch_window_s=0.01)
    await store.open()
    try:
        store.lull.started()  # never finished: a server always busy
        await store.fetchrow("SELECT 1", ())
        began = time.monotonic()
        store.write_later("CREATE TABLE IF NOT EXISTS marks (k TEXT)", ())
        await asyncio.wait_for(store.flush(), 5 * MAX_DEFER_S)
        assert time.monotonic() - began < MAX_DEFER_S * 0.75
    finally:
        store.lull.finished({})
        await store.close()


async def test_a_batchs_commit_begins_in_a_lull(tmp_path: Path) -> None:
    """A request that begins while a batch's only statement runs holds the commit until it
    ends: the row is not read before."""
    store = Store(str(tmp_path / "db"), batch_window_s=0.01)
    await store.open()
    executemany = store.writer.executemany

    def started_meanwhile(sql: str, rows: list[tuple[object, ...]]) -> object:
        store.lull.started()  # a request begins while the statement runs
        return executemany(sql, rows)

    store.writer.executemany = started_meanwhile  # type: ignore[method-assign]
    try:
        await store.insert_request({"id": "r1", "created_at": 1.0, "model": "m", "report": {}})
        await asyncio.sleep(MAX_DEFER_S / 2)
        assert await store.get_request("r1") is None  # written, not committed
        store.lull.finished({})
        await asyncio.wait_for(store.flush(), 2.0)
        assert await store.get_request("r1") is not None
    finally:
        await store.close()
