"""``/readyz`` reports the store's reachability (200 ready, 503 otherwise) while ``/healthz``
stays liveness; the app's lifespan starts the periodic prune and stops it on shutdown."""

from __future__ import annotations

import asyncio
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
        assert r.json() == {"status": "not_ready", "store": "unreachable"}
        assert (await client.get("/healthz")).status_code == 200  # still alive
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
