"""Two ``ctxproxy serve`` processes on one PostgreSQL, as a gateway's replicas behind a load
balancer: 64 concurrent clients whose requests for the same sessions alternate between them lose
no update (every request's entity is in its session's state) and no log row, and get no 5xx.
Faults: PostgreSQL stopped mid-load and started again (requests keep answering, the backlog is
written), and a replica killed mid-stream (its row is marked, never silently missing)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from tests.support.factories import assistant, request, result, shell, user
from tests.support.fake_upstream import FakeUpstream, Script
from tests.support.postgres import PgServer, start_server, unavailable
from tests.support.replicas import Replica, start_replicas

CLIENTS = 64
SESSIONS = 16
PER_CLIENT = 4


@pytest.fixture(scope="module")
def pg() -> Iterator[tuple[PgServer, str]]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    server = start_server()
    yield server, server.database()
    server.destroy()


@pytest.fixture(scope="module")
def config(_fake_upstream_server: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replicas") / "config.yaml"
    path.write_text(
        "upstreams:\n"
        f"  - {{name: fake, match: ['*'], base_url: '{_fake_upstream_server.base_url}'}}\n"
        "store: {heartbeat_s: 0.3, pool_size: 8}\n"
        "logging: {level: WARNING}\n"
    )
    return path


@pytest.fixture(scope="module")
def replicas(pg: tuple[PgServer, str], config: Path) -> Iterator[list[Replica]]:
    started = start_replicas(2, config, pg[1])
    yield started
    for replica in started:
        replica.stop()


def body(folder: str, call_id: str, earlier: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A conversation that made ``earlier`` folders (folder, call id), then ``folder``."""
    turns = []
    for made, made_id in (*earlier, (folder, call_id)):
        turns += [
            assistant(None, shell(made_id, f"mkdir -p {made}")),
            result(made_id, "[Command finished with exit code 0]"),
        ]
    return orjson.dumps(request(user("make a folder"), *turns))


async def load(
    urls: list[str], tag: str, per_client: int = PER_CLIENT, on_answer: Any = None
) -> tuple[list[int], list[str], dict[str, set[str]]]:
    """Every client sends ``per_client`` requests to its session, alternating replicas; returns
    the statuses, the request ids and, per session, the folders its requests made."""
    statuses: list[int] = []
    ids: list[str] = []
    made: dict[str, set[str]] = {}
    # idle connections let go before the replicas' keep-alive (5 s) closes them: a request
    # sent on one the server is closing fails with a ReadError (seen on a loaded machine)
    limits = httpx.Limits(max_connections=CLIENTS * 2, keepalive_expiry=2.0)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def one_client(c: int) -> None:
            sid = f"{tag}-s{c % SESSIONS}"
            earlier: tuple[tuple[str, str], ...] = ()
            for k in range(per_client):
                # each client's conversation grows by a folder a request: a session holds one
                # branch per client (its lineage keeps them apart), all written at once
                folder = f"/w/{sid}/c{c}k{k}"
                made.setdefault(sid, set()).add(folder)
                r = await client.post(
                    urls[(c // SESSIONS + k) % len(urls)] + "/v1/chat/completions",
                    content=body(folder, f"call_{c}_{k}", earlier),
                    headers={"content-type": "application/json", "x-session-id": sid},
                )
                earlier += ((folder, f"call_{c}_{k}"),)
                statuses.append(r.status_code)
                ids.append(r.headers.get("x-ctxproxy-request-id", ""))
                if on_answer is not None:
                    await on_answer(len(statuses))

        await asyncio.gather(*(one_client(c) for c in range(CLIENTS)))
    return statuses, ids, made


async def completed_rows(url: str, ids: list[str], want: int, timeout: float = 20.0) -> int:
    conn = await asyncpg.connect(url)
    try:
        deadline = time.monotonic() + timeout
        while True:
            n = await conn.fetchval(
                "SELECT count(*) FROM requests WHERE id = ANY($1) AND status IS NOT NULL", ids
            )
            if n >= want or time.monotonic() > deadline:
                return int(n)
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


async def entity_paths(url: str, sid: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        # a client without a key: the anonymous principal's session
        state = await conn.fetchval("SELECT state FROM sessions WHERE id = $1", "anonymous/" + sid)
    finally:
        await conn.close()
    data = orjson.loads(state)
    branches = [data, *(tip[2] for tip in data.get("_lineage", {}).get("tips", []))]
    return {e["path"] for branch in branches for e in branch.get("entities", [])}


async def test_two_replicas_lose_no_update_and_no_row(
    pg: tuple[PgServer, str], replicas: list[Replica], fake_upstream: FakeUpstream
) -> None:
    url = pg[1]
    statuses, ids, made = await load([r.url for r in replicas], "ok")
    assert len(statuses) == CLIENTS * PER_CLIENT and set(statuses) == {200}
    assert await completed_rows(url, ids, len(ids)) == len(ids)  # 0 lost log rows
    for sid, folders in made.items():  # 0 lost updates: every request's folder is remembered
        assert await entity_paths(url, sid) == folders, sid


async def test_postgres_stopped_mid_load_then_back(
    pg: tuple[PgServer, str], replicas: list[Replica], fake_upstream: FakeUpstream
) -> None:
    server, url = pg
    stopped = threading.Event()

    async def stop_once(answered: int) -> None:
        if answered == 40 and not stopped.is_set():
            stopped.set()
            await asyncio.to_thread(server.stop)

    try:
        statuses, ids, _ = await load([r.url for r in replicas], "outage", 2, stop_once)
        assert stopped.is_set() and set(statuses) == {200}  # kept answering without it
    finally:
        server.ensure_started()
    assert await completed_rows(url, ids, len(ids), timeout=30) == len(ids)  # backlog written


async def test_a_replica_killed_mid_stream_leaves_its_row_marked(
    pg: tuple[PgServer, str], replicas: list[Replica], config: Path, fake_upstream: FakeUpstream
) -> None:
    url = pg[1]
    doomed = start_replicas(1, config, url)[0]
    fake_upstream.script = Script(hold_after_first_chunk=True, content="one two three")
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            payload = orjson.loads(body("/w/doomed", "call_d"))
            payload["stream"] = True
            async with client.stream(
                "POST", doomed.url + "/v1/chat/completions", json=payload
            ) as r:
                request_id = r.headers["x-ctxproxy-request-id"]
                chunks = r.aiter_raw()  # kept: a dropped iterator closes the stream
                await chunks.__anext__()  # the first chunk: mid-stream now
                await asyncio.sleep(0.3)  # its row is queued and written (batched)
                doomed.kill()
    except httpx.HTTPError:
        pass
    finally:
        fake_upstream.release.set()
        doomed.stop()
    conn = await asyncpg.connect(url)
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            row = await conn.fetchrow(
                "SELECT status, error_type FROM requests WHERE id = $1", request_id
            )
            if row is not None and row["status"] is not None:
                break
            await asyncio.sleep(0.2)
    finally:
        await conn.close()
    assert row is not None, "the killed replica's row is missing"
    assert (row["status"], row["error_type"]) == (503, "replica_stopped")
