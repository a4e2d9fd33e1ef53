"""Retention on the SQLite store: the prune deletes old request rows and idle sessions (their
cache reports too) in bounded steps run by the writer task, never a session with a save queued,
while request rows keep landing; the periodic task runs and stops with the app; ``ping`` says
whether the store answers; compaction gives pages back."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from proxy.settings import SettingsError, settings_from_mapping
from proxy.store import retention
from proxy.store.cache_feedback import CacheFeedback
from proxy.store.sqlite import Store
from rules.base import SessionState

NOW = 1_000_000_000.0


async def open_store(path: Path) -> Store:
    store = Store(str(path), batch_window_s=0.005)
    await store.open()
    return store


def count(path: Path, table: str) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


async def add_requests(store: Store, n: int, created_at: float, prefix: str) -> None:
    for i in range(n):
        row = {"id": f"{prefix}{i}", "created_at": created_at + i * 1e-3, "report": {"k": "v"}}
        await store.insert_request(row)
    await store.flush()


async def add_sessions(store: Store, ids: list[str], at: float) -> None:
    for sid in ids:
        await store.save_state(sid, SessionState({"n": 1}), None)
        store.cache_feedback.put(sid, CacheFeedback(at, 100, 50, 0))
    await store.flush()
    marks = ",".join("?" * len(ids))
    await store.writer.execute(
        f"UPDATE sessions SET updated_at = ? WHERE id IN ({marks})", (at, *ids)
    )
    await store.writer.commit()


async def test_old_rows_go_in_bounded_steps_and_recent_ones_stay(tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = await open_store(path)
    deletes: list[str] = []
    try:
        await add_requests(store, 1_234, NOW - 40 * retention.DAY_S, "old")
        await add_requests(store, 10, NOW - 1 * retention.DAY_S, "new")
        await store.writer.set_trace_callback(
            lambda sql: deletes.append(sql) if sql.startswith("DELETE FROM requests") else None
        )
        counts = await retention.prune_now(store, 30, 14, now=NOW)
        assert counts == {"requests": 1_234, "sessions": 0, "session_cache": 0, "response_ids": 0}
        assert 3 <= len(deletes) <= 13  # 500 rows a step at most, one transaction each
        assert all(int(d.rsplit("LIMIT ", 1)[1].rstrip(")")) <= 500 for d in deletes)
        assert count(path, "requests") == 10
        assert await store.get_request("new0") is not None
    finally:
        await store.close()


async def test_idle_sessions_go_with_their_cache_reports(tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = await open_store(path)
    try:
        idle = [f"idle{i}" for i in range(620)]
        await add_sessions(store, idle, NOW - 20 * retention.DAY_S)
        await add_sessions(store, ["live"], NOW - 3600)
        # a cache report whose session has no state row: by its own time
        store.cache_feedback.put("orphan", CacheFeedback(NOW - 30 * retention.DAY_S, 1, 0, 0))
        await store.flush()
        counts = await retention.prune_now(store, 30, 14, now=NOW)
        assert counts == {"requests": 0, "sessions": 620, "session_cache": 621, "response_ids": 0}
        assert count(path, "sessions") == 1 and count(path, "session_cache") == 1
        # forgotten in memory too: the session starts afresh
        state, _ = await store.load_state("idle3")
        assert state.to_json() == {}
        assert await store.cache_feedback.get("idle3") is None
        assert (await store.load_state("live"))[0].to_json() == {"n": 1}
    finally:
        await store.close()


async def test_a_session_with_a_save_queued_is_not_idle(tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = await open_store(path)
    store.batch_window_s = 0.2  # the save below waits in the queue while the prune selects
    try:
        await add_sessions(store, ["s"], NOW - 20 * retention.DAY_S)
        await store.save_state("s", SessionState({"n": 2}), None)
        idle_before = NOW - 14 * retention.DAY_S
        counts = await store.prune(retention.KEEP, idle_before)
        await store.flush()
        assert counts["sessions"] == 0
        assert (await store.load_state("s"))[0].to_json() == {"n": 2}
        assert count(path, "sessions") == 1
    finally:
        await store.close()


async def test_zero_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = await open_store(path)
    try:
        await add_requests(store, 5, 1.0, "r")
        await add_sessions(store, ["s"], 1.0)
        assert retention.cutoffs(0, 0, NOW) == (retention.KEEP, retention.KEEP)
        counts = await retention.prune_now(store, 0, 0, now=NOW)
        assert counts == {"requests": 0, "sessions": 0, "session_cache": 0, "response_ids": 0}
        assert count(path, "requests") == 5 and count(path, "sessions") == 1
        assert retention.start(store, 0, 0) is None  # nothing expires: no task
    finally:
        await store.close()


async def test_requests_keep_landing_while_a_prune_runs(tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = await open_store(path)
    try:
        await add_requests(store, 5_000, NOW - 40 * retention.DAY_S, "old")

        async def traffic() -> None:
            for i in range(200):
                await store.insert_request({"id": f"live{i}", "created_at": NOW + i})
                await store.finish_request(f"live{i}", {"status": 200})
                await asyncio.sleep(0)

        counts, _ = await asyncio.gather(retention.prune_now(store, 30, 0, now=NOW), traffic())
        await store.flush()
        assert counts["requests"] == 5_000
        assert count(path, "requests") == 200 and store.write_errors == 0
        assert (await store.get_request("live199"))["status"] == 200
    finally:
        await store.close()


async def test_the_periodic_task_prunes_and_stops(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "db"
    store = await open_store(path)
    monkeypatch.setattr(retention, "FIRST_DELAY_S", 0.01)
    try:
        await add_requests(store, 3, 1.0, "ancient")
        task = retention.start(store, 30, 14)
        assert task is not None
        for _ in range(200):
            if count(path, "requests") == 0:
                break
            await asyncio.sleep(0.01)
        assert count(path, "requests") == 0
        await retention.stop(task)
        assert task.cancelled() or task.done()
    finally:
        await store.close()


async def test_a_failed_run_is_logged_and_the_task_goes_on(caplog) -> None:
    class Broken:
        calls = 0

        async def prune(self, older_than: float, idle_before: float) -> dict[str, int]:
            Broken.calls += 1
            raise RuntimeError("database gone")

    task = asyncio.create_task(retention.run_periodically(Broken(), 30, 14, 0.01, 0.01))
    for _ in range(200):
        if Broken.calls >= 2:
            break
        await asyncio.sleep(0.01)
    await retention.stop(task)
    assert Broken.calls >= 2
    assert "the prune failed" in caplog.text


async def test_ping(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "db")
    assert await store.ping() is True
    await store.close()
    assert await store.ping() is False


async def test_compaction_gives_pages_back(tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = await open_store(path)
    try:
        big = {"text": "x" * 4_000}
        for i in range(500):
            await store.insert_request({"id": f"r{i}", "created_at": 1.0, "report": big})
        await store.flush()
        await retention.prune_now(store, 1, 0, now=NOW)
        out = await retention.compact_sqlite(store)
        assert out["compaction"] == "incremental_vacuum"  # a new file is made for it
        assert out["free_pages"] > 400
        assert out["bytes_after"] < out["bytes_before"] / 4
    finally:
        await store.close()


async def test_an_older_file_is_vacuumed_whole_and_converted(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with sqlite3.connect(path) as db:  # a file from before auto_vacuum was set
        db.execute("CREATE TABLE t (x)")
    store = await open_store(path)
    try:
        out = await retention.compact_sqlite(store)
        assert out["compaction"] == "vacuum"
        assert await retention._pragma(store.writer, "auto_vacuum") == 2
        assert (await retention.compact_sqlite(store))["compaction"] == "incremental_vacuum"
    finally:
        await store.close()


def test_settings_validate_the_retention() -> None:
    store = settings_from_mapping({}).store
    assert (store.retention_days, store.session_ttl_days) == (30, 14)
    with pytest.raises(SettingsError, match=r"store\.retention_days"):
        settings_from_mapping({"store": {"retention_days": -1}})
    with pytest.raises(SettingsError, match=r"store\.session_ttl_days"):
        settings_from_mapping({"store": {"session_ttl_days": "soon"}})


async def test_slow_steps_shrink_to_keep_the_writer_free(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "db"
    store = await open_store(path)
    monkeypatch.setattr(retention, "STEP_TARGET_S", 1e-9)  # every step is "too slow"
    deletes: list[str] = []
    try:
        await add_requests(store, 700, 1.0, "old")
        await store.writer.set_trace_callback(
            lambda sql: deletes.append(sql) if sql.startswith("DELETE FROM requests") else None
        )
        counts = await retention.prune_now(store, 1, 0, now=NOW)
        assert counts["requests"] == 700 and count(path, "requests") == 0
        assert retention.MIN_STEP_ROWS == 20
        assert len(deletes) == 32  # 100, then thirty of 20, then one finding none left
        assert deletes[0].endswith("LIMIT 100)")
        assert all(d.endswith("LIMIT 20)") for d in deletes[1:])
    finally:
        await store.close()
