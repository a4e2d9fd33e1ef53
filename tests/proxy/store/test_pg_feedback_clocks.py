"""The upstream's cache report on a session's latest request, shared by replicas whose host
clocks differ: each report is dated by the database's clock when stored, and read back in the
reading replica's own clock, so the newest request's report wins whichever replica served it,
and the cost model's idle time is the time really elapsed since it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from proxy.store import postgres
from proxy.store.cache_feedback import CacheFeedback
from proxy.store.postgres import PostgresStore
from tests.proxy.store.test_pg_replicas_alive import SKEW, SkewedClock
from tests.support.postgres import PgServer

SID = "alice/s"


@pytest.fixture
async def url(pg_server: PgServer) -> str:
    return pg_server.database()


@pytest.fixture
async def stores(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[PostgresStore]]:
    monkeypatch.setattr(postgres, "time", SkewedClock())
    made: list[PostgresStore] = []
    yield made
    for store in made:
        await store.close()


async def opened(url: str, skew: float) -> PostgresStore:
    store = PostgresStore(url, batch_window_s=0.0)
    token = SKEW.set(skew)
    try:
        await store.open()
    finally:
        SKEW.reset(token)
    return store


def report(at: float, cached: int) -> CacheFeedback:
    return CacheFeedback(at=at, prompt_tokens=4000, cached_tokens=cached, cache_write_tokens=0)


@pytest.mark.parametrize("skew", [-90.0, 90.0])
async def test_the_latest_report_wins_whatever_the_replicas_clocks(
    url: str, stores: list[PostgresStore], skew: float
) -> None:
    # two replicas behind a round-robin balancer, the second's host clock 90 s off the first's
    first, second = await opened(url, 0.0), await opened(url, skew)
    stores += [first, second]
    now = time.time()
    first.cache_feedback.put(SID, report(now - 2.0, cached=1000))  # request 1, on the first
    await first.flush()
    async with second.session(SID):  # request 2, on the second: dated by its own clock
        second.cache_feedback.put(SID, report(now - 1.0 + skew, cached=3000))
    await second.flush()
    async with first.session(SID):  # request 3 back on the first: it sees request 2's report
        seen = await first.cache_feedback.get(SID)
    assert seen is not None and seen.cached_tokens == 3000
    assert seen.at == pytest.approx(now - 1.0, abs=0.5)  # in the first's clock
    third = await opened(url, 0.0)  # a replica started later reads it from the table
    stores.append(third)
    stored = await third.cache_feedback.get(SID)
    assert stored is not None and stored.cached_tokens == 3000
    assert stored.at == pytest.approx(now - 1.0, abs=0.5)
    # and the second, asked again, has it in its own clock
    again = await second.cache_feedback.get(SID)
    assert again is not None and again.at == pytest.approx(now - 1.0 + skew, abs=0.5)
