"""``ctxproxy vacuum``: applies the retention on demand (the config's days, or the flags'),
prints what it deleted, compacts the SQLite file; like the read commands, never creates a log."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import orjson

from proxy.store.sqlite import Store
from rules.base import SessionState
from tests.proxy.test_cli import ctxproxy

DAY = 86_400.0


def make_log(path: Path) -> None:
    async def fill() -> None:
        store = Store(str(path), batch_window_s=0)
        await store.open()
        now = time.time()
        for i in range(700):  # more than one prune step
            await store.insert_request(
                {"id": f"old{i}", "created_at": now - 45 * DAY, "report": {"x": "y" * 2000}}
            )
        await store.insert_request({"id": "new", "created_at": now - DAY})
        await store.save_state("idle", SessionState({"n": 1}), None)
        await store.save_state("live", SessionState({"n": 1}), None)
        await store.flush()
        await store.close()

    asyncio.run(fill())
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE sessions SET updated_at = ? WHERE id = 'idle'", (time.time() - 20 * DAY,)
        )


def test_vacuum_prunes_by_the_config_and_prints_counts(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    make_log(db)
    out = ctxproxy("vacuum", "--db", str(db))
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert "deleted 700 request rows (older than 30 days" in text
    assert "1 sessions" in text and "incremental_vacuum:" in text
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT id FROM requests").fetchall() == [("new",)]
        assert conn.execute("SELECT id FROM sessions").fetchall() == [("live",)]


def test_vacuum_flags_override_the_config_and_print_json(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    make_log(db)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("store:\n  retention_days: 0\n  session_ttl_days: 0\n")
    kept = orjson.loads(ctxproxy("vacuum", "--config", str(cfg), "--db", str(db), "--json").stdout)
    assert kept["deleted"] == {"requests": 0, "sessions": 0, "session_cache": 0, "response_ids": 0}
    out = ctxproxy(
        "vacuum", "--config", str(cfg), "--db", str(db), "--json", "--full",
        "--retention-days", "0.5", "--session-ttl-days", "10",
    )  # fmt: skip
    data = orjson.loads(out.stdout)
    deleted = {"requests": 701, "sessions": 1, "session_cache": 0, "response_ids": 0}
    assert data["deleted"] == deleted
    assert data["compaction"] == "vacuum"
    assert data["bytes_after"] < data["bytes_before"]


def test_vacuum_of_a_missing_log_is_an_error(tmp_path: Path) -> None:
    out = ctxproxy("vacuum", "--db", str(tmp_path / "typo.db"))
    assert out.returncode == 2 and b"does not exist" in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_bad_retention_in_the_config_exits_2(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("store:\n  retention_days: -3\n")
    out = ctxproxy("vacuum", "--config", str(cfg), "--db", str(tmp_path / "x.db"))
    assert out.returncode == 2 and b"store.retention_days" in out.stderr
