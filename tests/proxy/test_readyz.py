"""``/readyz`` reports whether the store can serve requests (200 ready; 503 with the reason when
it does not answer or its tables cannot be read), its answer kept two seconds, while ``/healthz``
stays liveness; the app's lifespan starts the periodic prune and stops it on shutdown."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from proxy.store.sqlite import Store
from tests.conftest import in_process, proxy_settings

UPSTREAM = "http://upstream.test/v1"


async def test_ready_when_the_store_answers(tmp_path: Path) -> None:
    async with in_process(proxy_settings(UPSTREAM), str(tmp_path / "db")) as client:
        r = await client.get("/readyz")
        assert r.status_code == 200
        assert r.json() == {"status": "ready", "store": "ok"}
        assert r.headers["cache-control"] == "no-store"


@pytest.mark.parametrize("failure", ["false", "raises", "closed"])
async def test_not_ready_when_the_store_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    async with in_process(proxy_settings(UPSTREAM), str(tmp_path / "db")) as client:
        store: Store = client.app.state.services.store  # type: ignore[attr-defined]
        if failure == "closed":  # the writer task is gone: nothing would be written
            monkeypatch.setattr(store, "_writer_task", asyncio.get_running_loop().create_future())
            store._writer_task.set_result(None)  # type: ignore[union-attr]
        else:

            async def ping() -> bool:
                if failure == "raises":
                    raise OSError("connection refused")
                return False

            monkeypatch.setattr(store, "ping", ping)
        r = await client.get("/readyz")
        assert r.status_code == 503
        reason = "the store did not answer its ping"
        if failure == "raises":
            reason = "connection refused"  # what the store said
        assert r.json() == {"status": "not_ready", "store": "unreachable", "reason": reason}
        assert (await client.get("/healthz")).status_code == 200  # still alive
        monkeypatch.undo()


@pytest.mark.parametrize("table", ["sessions", "session_cache", "requests", "response_ids"])
async def test_not_ready_when_a_table_is_gone(tmp_path: Path, table: str) -> None:
    path = tmp_path / "log.db"
    async with in_process(proxy_settings(UPSTREAM), str(path)) as client:
        with sqlite3.connect(path) as db:  # damaged while the proxy runs
            db.execute(f"DROP TABLE {table}")
        r = await client.get("/readyz")
        assert r.status_code == 503
        want = {"status": "not_ready", "store": "unreadable", "reason": f"no such table: {table}"}
        assert r.json() == want
        assert (await client.get("/healthz")).status_code == 200  # still alive


async def test_the_answer_is_kept_two_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with in_process(proxy_settings(UPSTREAM), str(tmp_path / "db")) as client:
        store: Store = client.app.state.services.store  # type: ignore[attr-defined]
        pings = 0
        real_ping = store.ping

        async def ping() -> bool:
            nonlocal pings
            pings += 1
            return await real_ping()

        monkeypatch.setattr(store, "ping", ping)
        answers = await asyncio.gather(*(client.get("/readyz") for _ in range(5)))
        assert [r.status_code for r in answers] == [200] * 5
        assert pings == 1  # probes together, and within the two seconds, share one check
        client.app.state.readiness.expires = 0.0  # type: ignore[attr-defined]
        assert (await client.get("/readyz")).status_code == 200 and pings == 2
        monkeypatch.undo()


async def test_the_lifespan_runs_the_prune_and_stops_it(tmp_path: Path) -> None:
    settings = proxy_settings(UPSTREAM, store={"retention_days": 1, "session_ttl_days": 1})
    async with in_process(settings, str(tmp_path / "db")):
        names = {t.get_name() for t in asyncio.all_tasks()}
        assert "ctxproxy-retention" in names
    assert "ctxproxy-retention" not in {t.get_name() for t in asyncio.all_tasks()}
    off = proxy_settings(UPSTREAM, store={"retention_days": 0, "session_ttl_days": 0})
    async with in_process(off, str(tmp_path / "db2")):
        assert "ctxproxy-retention" not in {t.get_name() for t in asyncio.all_tasks()}
