"""The store's writer: writes queued within one batch window coalesce (a request's insert and
finish become one row write, a session's last state wins, a parent id is never dropped), rows
written in later batches still update, and a row that cannot be written is the only one lost."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from proxy.store.sqlite import Store
from rules.base import SessionState
from tests.proxy.store.conftest import StoreFactory


async def open_store(path: Path, window: float = 0.05) -> Store:
    store = Store(str(path), batch_window_s=window)
    await store.open()
    return store


async def test_insert_and_finish_in_one_window_become_one_complete_row(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "db")
    traced: list[str] = []
    await store.writer.set_trace_callback(traced.append)
    try:
        await store.insert_request({"id": "r1", "created_at": 1.0, "model": "m", "report": {}})
        await store.finish_request("r1", {"status": 200, "usage": {"prompt_tokens": 3}})
        await store.flush()
        row = await store.get_request("r1")
        assert row is not None
        assert (row["model"], row["status"], row["usage"]) == ("m", 200, {"prompt_tokens": 3})
        writes = [s for s in traced if s.startswith(("INSERT INTO requests", "UPDATE requests"))]
        assert len(writes) == 1 and writes[0].startswith("INSERT")
    finally:
        await store.close()


async def test_a_finish_in_a_later_batch_updates_the_row(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "db", window=0.0)
    try:
        await store.insert_request({"id": "r1", "created_at": 1.0, "model": "m"})
        await store.flush()
        assert (await store.get_request("r1"))["status"] is None  # in flight
        await store.finish_request("r1", {"status": 502, "error_type": "upstream_connection_error"})
        await store.flush()
        row = await store.get_request("r1")
        assert (row["status"], row["error_type"]) == (502, "upstream_connection_error")
    finally:
        await store.close()


async def test_the_last_state_of_a_session_wins_and_keeps_its_parent(tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = await open_store(path)
    try:
        await store.save_state("child", SessionState({"n": 1}), "parent")
        await store.save_state("child", SessionState({"n": 2}), None)
        await store.save_state("other", SessionState({"n": 9}), None)
        await store.flush()
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        rows = dict(
            (r[0], (r[1], r[2])) for r in db.execute("SELECT id, parent_id, state FROM sessions")
        )
    assert rows["child"] == ("parent", '{"n":2}')
    assert rows["other"] == (None, '{"n":9}')


async def test_one_bad_row_is_the_only_one_lost(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "db")
    try:
        await store.insert_request({"id": "dup", "created_at": 1.0})
        await store.flush()
        await store.insert_request({"id": "dup", "created_at": 2.0})  # primary key taken
        await store.insert_request({"id": "ok", "created_at": 3.0})
        await store.insert_request({"id": "bad", "created_at": 4.0, "report": {"x": {1, 2}}})
        await store.finish_request("ok", {"status": 200})
        await store.flush()
        assert store.write_errors == 2  # the duplicate and the unencodable report
        assert (await store.get_request("ok"))["status"] == 200
        assert (await store.get_request("dup"))["created_at"] == 1.0
        assert await store.get_request("bad") is None
    finally:
        await store.close()


async def test_a_state_evicted_from_the_cache_before_it_is_written_is_still_read(
    tmp_path: Path,
) -> None:
    store = Store(str(tmp_path / "db"), state_cache_size=1, batch_window_s=0.2)
    await store.open()
    try:
        await store.save_state("a", SessionState({"n": 1}), None)
        await store.save_state("b", SessionState({"n": 2}), None)  # evicts "a" from the cache
        state, _ = await store.load_state("a")  # not in the database yet either
        assert state.get("n") == 1
        await store.flush()
        assert store._unwritten == {}
    finally:
        await store.close()


async def test_coalesced_saves_keep_the_first_time_as_created_at(tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = await open_store(path, window=0.2)
    try:
        await store.save_state("s", SessionState({"n": 1}), None)
        await asyncio.sleep(0.05)
        await store.save_state("s", SessionState({"n": 2}), None)
        await store.flush()
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        created, updated = db.execute(
            "SELECT created_at, updated_at FROM sessions WHERE id = 's'"
        ).fetchone()
    assert updated - created >= 0.04


async def test_a_batch_is_encoded_a_few_rows_at_a_time_with_the_same_statements() -> None:
    """The writer's encoding of a batch (redaction, JSON) gives the event loop back every few
    rows, so a request never waits for a whole batch's; the statements are those of one pass."""
    from proxy.store.batch import Finish, Insert, SaveState, paced_statements, statements
    from proxy.store.dialect import SQLITE

    ops: list[object] = []
    for k in range(9):
        report = {"session": "s", "warnings": [{"text": "key sk-abcdefghijklmnopqrstuvwx"}]}
        ops.append(Insert({"id": f"r{k}", "created_at": 1.0, "model": "m", "report": report}))
        ops.append(Finish(f"r{k}", {"status": 200}))
    ops.append(Finish("earlier", {"status": 500}))
    ops.append(SaveState("s", SessionState({"a": {"b": 1}}), None, 2.0, 2.0))
    turns = 0

    async def count_turns() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    counter = asyncio.create_task(count_turns())
    await asyncio.sleep(0)
    try:
        paced = await paced_statements(ops, SQLITE, rows_per_turn=2)
    finally:
        counter.cancel()
    assert paced == statements(ops, SQLITE)
    assert turns >= 5  # 11 rows and states encoded, the loop's turn after every 2
    insert_rows = next(rows for sql, rows in paced[0] if sql.startswith("INSERT INTO requests"))
    assert all("sk-abc" not in str(row) for row in insert_rows)


async def test_closing_ends_the_batch_window_and_writes_what_is_queued(
    make_store: StoreFactory,
) -> None:
    """A store closed while its writer waits out the batch window writes what is queued at once:
    a shutdown (and every short-lived app) does not wait the window out."""
    store = make_store(batch_window_s=30.0)
    await store.open()
    await store.insert_request({"id": "r1", "created_at": 1.0, "model": "m"})
    await asyncio.sleep(0.05)  # the writer has the insert and sits in its window
    started = time.monotonic()
    await store.close()
    assert time.monotonic() - started < 5.0
    reopened = make_store()
    await reopened.open()
    try:
        assert (await reopened.get_request("r1"))["model"] == "m"
    finally:
        await reopened.close()
