"""One behaviour, two stores: every test here runs against SQLite and against a real PostgreSQL
(``make_store``/``store`` in this folder's conftest). Migrations apply once, also when two
processes start together; the request log's batches keep the same guarantees; a session's
load → save is a critical section, across stores on one database too; the cache report, the
reads /ui and ``ctxproxy logs`` use, the retention prune and the readiness ping behave alike."""

from __future__ import annotations

import asyncio
from typing import Any

from proxy.store.cache_feedback import CacheFeedback
from proxy.store.migrations import MIGRATIONS
from proxy.store.pg_migrations import names_match
from rules.base import SessionState
from tests.proxy.store.conftest import StoreFactory

ALL = [name for name, _ in MIGRATIONS]


async def test_migrations_are_named_alike_and_applied_once(make_store: StoreFactory) -> None:
    assert names_match()
    first, second = make_store(), make_store()
    await first.open()
    await first.close()
    await second.open()
    try:
        assert first.applied == ALL and second.applied == []
    finally:
        await second.close()


async def test_two_processes_starting_together_apply_each_migration_once(
    make_store: StoreFactory,
) -> None:
    stores = [make_store() for _ in range(6)]
    try:
        await asyncio.gather(*(s.open() for s in stores))
        applied = [name for s in stores for name in s.applied]
        assert sorted(applied) == sorted(ALL)
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_insert_and_finish_make_one_complete_row(store: Any) -> None:
    await store.insert_request({"id": "r1", "created_at": 1.0, "model": "m", "report": {"a": 1}})
    await store.finish_request("r1", {"status": 200, "usage": {"prompt_tokens": 3}})
    await store.insert_request({"id": "r2", "created_at": 2.0, "model": "m", "stream": True})
    await store.flush()
    assert (await store.get_request("r2"))["status"] is None  # in flight
    await store.finish_request("r2", {"status": 502, "latency_ms": 12, "client_disconnected": 1})
    await store.flush()
    one, two = await store.get_request("r1"), await store.get_request("r2")
    assert (one["status"], one["usage"], one["report"]) == (200, {"prompt_tokens": 3}, {"a": 1})
    assert (two["status"], two["latency_ms"], two["stream"]) == (502, 12.0, 1)
    assert store.write_errors == 0


async def test_the_cache_line_is_kept_with_the_row_and_redacted(store: Any) -> None:
    """The ``cache`` column (``proxy.attribution``): JSON written with the row's completion, read
    back decoded, a key a provider's diagnosis might echo redacted."""
    await store.insert_request({"id": "c1", "created_at": 1.0, "session_id": "p/s"})
    line = {
        "outcome": "miss",
        "cause": "client",
        "where": "system",
        "rebilled": 1400,
        "provider": {"reason": "sk-ant-api03-" + "x" * 40},
    }
    await store.finish_request("c1", {"status": 200, "cache": line})
    await store.flush()
    row = await store.get_request("c1")
    assert {k: row["cache"][k] for k in ("outcome", "cause", "where", "rebilled")} == {
        "outcome": "miss", "cause": "client", "where": "system", "rebilled": 1400,
    }  # fmt: skip
    assert "sk-ant-api03" not in str(row["cache"])
    [listed] = await store.list_requests(session="p/s")
    assert listed["cache"] == row["cache"]


async def test_one_bad_row_is_the_only_one_lost(store: Any) -> None:
    await store.insert_request({"id": "dup", "created_at": 1.0})
    await store.flush()
    await store.insert_request({"id": "dup", "created_at": 2.0})  # primary key taken
    await store.insert_request({"id": "ok", "created_at": 3.0})
    await store.insert_request({"id": "bad", "created_at": 4.0, "report": {"x": {1, 2}}})
    await store.finish_request("ok", {"status": 200})
    await store.flush()
    assert store.write_errors == 2
    assert (await store.get_request("ok"))["status"] == 200
    assert (await store.get_request("dup"))["created_at"] == 1.0
    assert await store.get_request("bad") is None


async def test_secrets_in_client_text_are_redacted_and_nul_survives(store: Any) -> None:
    key = "sk-proj-ABCDEFGHijklmnop12345678"
    await store.insert_request({"id": "r", "created_at": 1.0, "model": key, "error": "a\x00b"})
    await store.flush()
    row = await store.get_request("r")
    assert key not in row["model"] and row["error"].startswith("a") and row["error"].endswith("b")


async def test_a_session_is_saved_and_keeps_its_parent(store: Any) -> None:
    async with store.session("child") as held:
        assert held.state.data == {} and held.parent_id is None
        await held.save(SessionState({"n": 1}), "parent")
    async with store.session("child") as held:
        assert (held.state.get("n"), held.parent_id) == (1, "parent")
        await held.save(SessionState({"n": 2}), None)
    await store.flush()
    assert await store.load_state("child") == (SessionState({"n": 2}), "parent")


async def test_a_failing_request_saves_nothing(store: Any) -> None:
    try:
        async with store.session("s") as held:
            await held.save(SessionState({"n": 1}), None)
            raise RuntimeError("the pipeline failed")
    except RuntimeError:
        pass
    state, _ = await store.load_state("s")
    assert state.get("n") in (None, 1)  # SQLite queues the save at once; PostgreSQL rolls back
    async with store.session("s") as held:  # and the session is free again
        await held.save(SessionState({"n": 5}), None)
    assert (await store.load_state("s"))[0].get("n") == 5


async def bump(store: Any, sid: str, tag: str) -> None:
    """One request's contribution: append ``tag`` to the session's list."""
    async with store.session(sid) as held:
        seen = list(held.state.get("seen") or [])
        await asyncio.sleep(0.002)  # a pipeline runs: others try to get in
        await held.save(SessionState({"seen": [*seen, tag]}), None)


async def test_one_sessions_requests_take_turns(store: Any) -> None:
    await asyncio.gather(*(bump(store, "s", f"t{i}") for i in range(30)))
    state, _ = await store.load_state("s")
    assert sorted(state.get("seen")) == sorted(f"t{i}" for i in range(30))
    assert len(store.locks) == 0  # idle sessions leave no lock behind


async def test_two_stores_on_one_database_lose_no_update(make_store: StoreFactory) -> None:
    """Two replicas (SQLite: two stores of one process take turns only through one lock, so
    only PostgreSQL serialises them; SQLite's is a sidecar store, and checks the cache alone)."""
    a, b = make_store(batch_window_s=0.0), make_store(batch_window_s=0.0)
    await a.open()
    await b.open()
    try:
        if a.kind == "sqlite":
            return
        jobs = [bump(a if (i // 4) % 2 else b, f"s{i % 4}", f"t{i}") for i in range(80)]
        await asyncio.gather(*jobs)
        for k in range(4):
            for replica in (a, b):  # each replica sees the other's writes (no stale cache)
                state, _ = await replica.load_state(f"s{k}")
                assert sorted(state.get("seen")) == sorted(f"t{i}" for i in range(k, 80, 4))
    finally:
        await a.close()
        await b.close()


async def test_ancestors_nearest_first_stopping_at_cycles(store: Any) -> None:
    for sid, parent in (("c", "b"), ("b", "a"), ("a", "c")):
        async with store.session(sid) as held:
            await held.save(SessionState({"me": sid}), parent)
    await store.flush()
    found = await store.ancestors("c")
    assert [(a.session_id, a.state.get("me"), a.depth) for a in found] == [
        ("c", "c", 1), ("b", "b", 2), ("a", "a", 3),
    ]  # fmt: skip
    assert [a.session_id for a in await store.ancestors("b", depth=5)] == ["b", "a", "c"]
    unknown = await store.ancestors("nobody")
    assert [(a.session_id, a.state.data) for a in unknown] == [("nobody", {})]
    async with store.session("c") as held:
        assert [a.session_id for a in await held.ancestors("b")] == ["b", "a", "c"]


async def test_cache_report_newer_wins_and_survives(make_store: StoreFactory) -> None:
    newer = CacheFeedback(at=200.0, prompt_tokens=3000, cached_tokens=2048, cache_write_tokens=None)
    older = CacheFeedback(at=100.0, prompt_tokens=2500, cached_tokens=0, cache_write_tokens=2400)
    first = make_store()
    await first.open()
    first.cache_feedback.put("s", newer)
    first.cache_feedback.put("s", older)
    assert await first.cache_feedback.get("s") == newer
    assert await first.cache_feedback.get("never") is None
    await first.close()
    second = make_store()
    await second.open()
    try:
        assert await second.cache_feedback.get("s") == newer
    finally:
        await second.close()


async def test_the_log_reads(store: Any) -> None:
    rows = [
        {"id": f"r{i}", "created_at": float(i), "session_id": f"s{i % 3}", "model": "m",
         "status": 200 if i % 2 else 500, "tokens_before": 10, "tokens_after": 5,
         "cached_tokens": 1}
        for i in range(12)
    ]  # fmt: skip
    for row in rows:
        await store.insert_request(row)
    await store.flush()
    newest = await store.list_requests(limit=3)
    assert [r["id"] for r in newest] == ["r11", "r10", "r9"]
    by = await store.list_requests(session="s1", status=200, limit=10)
    assert [r["id"] for r in by] == ["r7", "r1"]
    assert [r["id"] for r in await store.list_requests(after_created=9.5)] == ["r11", "r10"]
    sessions = await store.list_sessions(limit=2)
    assert [(s["session_id"], s["requests"]) for s in sessions] == [("s2", 4), ("s1", 4)]
    recent = await store.recent_sessions(6, 10)
    assert [(s["session_id"], s["requests"], s["cached_tokens"]) for s in recent] == [
        ("s2", 4, 4), ("s1", 4, 4), ("s0", 4, 4),
    ]  # fmt: skip


async def test_session_totals_add_the_tools_schema_to_the_billed_input(store: Any) -> None:
    """The session list shows billed input: each row's messages plus its tools section; a row
    without sections (refused before the rules ran) adds its messages only."""
    tools = {"tools": {"before": 700, "after": 650}, "user": {"before": 9, "after": 9}}
    rows = [
        {"id": "t1", "created_at": 1.0, "session_id": "s", "tokens_before": 100,
         "tokens_after": 80, "sections": tools},
        {"id": "t2", "created_at": 2.0, "session_id": "s", "tokens_before": 10,
         "tokens_after": 10},
        {"id": "t3", "created_at": 3.0, "session_id": "s"},
    ]  # fmt: skip
    for row in rows:
        await store.insert_request(row)
    await store.flush()
    (recent,) = await store.recent_sessions(10, 10)
    (listed,) = await store.list_sessions(limit=5)
    for totals in (recent, listed):
        assert (totals["tokens_before"], totals["tokens_after"]) == (110, 90)
        assert (totals["billed_before"], totals["billed_after"]) == (810, 740)
        assert isinstance(totals["billed_before"], int)


async def test_session_totals_count_the_loops_noted(store: Any) -> None:
    """The session list's loop count: each row's ``report.loops`` entries, summed; a row without
    a report, or with no loops, adds none."""
    loop = {"kind": "repeated_failure", "count": 3}
    rows = [
        {"id": "l1", "created_at": 1.0, "session_id": "s", "report": {"loops": [loop, loop]}},
        {"id": "l2", "created_at": 2.0, "session_id": "s", "report": {"prune": {}}},
        {"id": "l3", "created_at": 3.0, "session_id": "s", "report": {"loops": [loop]}},
        {"id": "l4", "created_at": 4.0, "session_id": "s"},
    ]
    for row in rows:
        await store.insert_request(row)
    await store.flush()
    (recent,) = await store.recent_sessions(10, 10)
    assert recent["loops"] == 3


async def test_prune_and_ping(store: Any) -> None:
    for i in range(5):
        await store.insert_request({"id": f"r{i}", "created_at": float(i)})
    for sid in ("old", "new"):
        async with store.session(sid) as held:
            await held.save(SessionState({"n": 1}), None)
    store.cache_feedback.put("old", CacheFeedback(1.0, 1, 1, None))
    await store.flush()
    assert await store.ping()
    counts = await store.prune(older_than=3.0, idle_before=0.0)
    assert counts["requests"] == 3 and counts["sessions"] == 0
    assert [r["id"] for r in await store.list_requests()] == ["r4", "r3"]


async def test_readiness_reads_every_table_a_request_writes(store: Any) -> None:
    from proxy.telemetry.health import not_ready

    assert await not_ready(store) is None  # the readiness probe's SQL runs on both databases


async def test_rows_listed_without_their_payloads(store: Any) -> None:
    """The pages' lists leave the captured payloads in the table (``bodies=False``)."""
    row = {"id": "b1", "created_at": 1.0, "session_id": "p/b", "request_body": "x" * 100,
           "forwarded_body": "y" * 100, "response_body": "z" * 100}  # fmt: skip
    await store.insert_request(row)
    await store.flush()
    [listed] = await store.list_requests(session="p/b", bodies=False)
    [whole] = await store.list_requests(session="p/b")
    payloads = {"request_body", "forwarded_body", "response_body"}
    assert not payloads & set(listed) and whole["forwarded_body"] == "y" * 100
    assert listed == {k: v for k, v in whole.items() if k not in payloads}


async def test_child_sessions_are_read_alike(store: Any) -> None:
    """/ui's session page lists the sessions naming it their parent (``conversations``)."""
    from proxy.inspect.conversations import child_sessions

    rows = [
        ("p1", 10.0, "lead", None),
        ("c1", 11.0, "kid-a", "lead"),
        ("c2", 12.0, "kid-b", "lead"),
        ("c3", 13.0, "kid-a", "lead"),
        ("o1", 14.0, "other", "elsewhere"),
        ("early", 5.0, "kid-z", "lead"),  # before the lead's first request kept: listed too
    ]
    for rid, at, sid, parent in rows:
        await store.insert_request(
            {"id": rid, "created_at": at, "session_id": sid, "parent_session_id": parent}
        )
    await store.flush()
    found = await child_sessions(store, "lead")
    assert [(c["session_id"], c["requests"], c["first_seen"]) for c in found] == [
        ("kid-z", 1, 5.0),
        ("kid-a", 2, 11.0),
        ("kid-b", 1, 12.0),
    ]


async def test_the_child_sessions_are_read_by_their_index(tmp_path: Any) -> None:
    """The list is exact and read by ``requests_parent``, not a scan of the request log (a
    bounded window of it had left children out of a busy log)."""
    import sqlite3

    from proxy.store.sqlite import Store

    path = str(tmp_path / "plan.db")
    store = Store(path)
    await store.open()
    statement = store.dialect.child_sessions
    await store.close()
    with sqlite3.connect(path) as db:
        plan = db.execute("EXPLAIN QUERY PLAN " + statement, ("lead", 100)).fetchall()
    assert any("requests_parent" in str(step) for step in plan), plan
