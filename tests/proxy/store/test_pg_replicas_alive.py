"""Which replicas the others take for stopped (``store.heartbeat_s``): a replica silent for 3
beats has its requests still in flight completed as 503 ``replica_stopped``. A replica that is
alive and beating is never taken for one, whatever its host's clock says, and a request of a
replica taken for stopped while it was only cut off from the database ends as it really did."""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from proxy.store import postgres
from proxy.store.postgres import PostgresStore
from tests.support.postgres import PgServer

BEAT_S = 0.1
# the offset of the host clock a store's tasks read (``SkewedClock``), set while it is opened
SKEW: contextvars.ContextVar[float] = contextvars.ContextVar("skew", default=0.0)


class SkewedClock:
    """The ``time`` module as the store sees it, its wall clock offset by ``SKEW``: each store's
    tasks (its heartbeat) keep the offset set when they were started, as two hosts' clocks
    would differ."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def time(self) -> float:
        return time.time() + SKEW.get()


@pytest.fixture
async def url(pg_server: PgServer) -> str:
    return pg_server.database()


@pytest.fixture
def clocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres, "time", SkewedClock())


async def opened(url: str, skew: float = 0.0, heartbeat_s: float = BEAT_S) -> PostgresStore:
    store = PostgresStore(url, batch_window_s=0.0, heartbeat_s=heartbeat_s)
    token = SKEW.set(skew)
    try:
        await store.open()
    finally:
        SKEW.reset(token)
    return store


@pytest.fixture
async def stores() -> AsyncIterator[list[PostgresStore]]:
    made: list[PostgresStore] = []
    yield made
    for store in made:
        await store.close()


async def row_of(store: PostgresStore, request_id: str) -> dict[str, Any]:
    row = await store.get_request(request_id)
    assert row is not None
    return row


@pytest.mark.parametrize("skew", [-120.0, 120.0])
async def test_a_replica_whose_clock_differs_is_not_taken_for_stopped(
    url: str, clocks: None, stores: list[PostgresStore], skew: float
) -> None:
    # one host's clock two minutes behind the other's, or ahead of it (NTP not running there)
    skewed, other = await opened(url, skew), await opened(url)
    stores += [skewed, other]
    for n, store in enumerate((skewed, other)):
        await store.insert_request({"id": f"in-flight-{n}", "created_at": time.time()})
        await store.flush()
    await asyncio.sleep(12 * BEAT_S)  # both beat and sweep many times
    for n in range(2):  # still in flight, as they are
        row = await row_of(other, f"in-flight-{n}")
        assert (row["status"], row["error_type"]) == (None, None), n


async def test_a_request_that_ends_after_its_replica_was_taken_for_stopped_ends_as_it_did(
    url: str, stores: list[PostgresStore]
) -> None:
    # a replica whose beats did not reach the database for 3 beats (cut off from it a while, or
    # its pool busy), while its request went on
    silent = await opened(url, heartbeat_s=3600.0)
    stores.append(silent)
    await silent.insert_request({"id": "slow", "created_at": time.time()})
    await silent.flush()
    stores.append(await opened(url))
    deadline = time.monotonic() + 10
    while (await row_of(silent, "slow"))["status"] is None and time.monotonic() < deadline:
        await asyncio.sleep(BEAT_S)
    assert (await row_of(silent, "slow"))["error_type"] == "replica_stopped"
    await silent.finish_request("slow", {"status": 200, "latency_ms": 1.0})
    await silent.flush()
    row = await row_of(silent, "slow")
    assert (row["status"], row["error_type"], row["error"]) == (200, None, None)
