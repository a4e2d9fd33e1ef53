"""asyncpg against psycopg 3 (async) on the PostgreSQL store's two hot statements, on a throwaway
server (``tests.support.postgres``):

- a session's turn as the store takes it (``proxy.store.postgres``): the hold (advisory lock +
  the state read, one call) and the save (upsert, COMMIT, unlock, one call), with a ~6 kB state;
- the request log's batch: 50 rows of 14 columns in one transaction (asyncpg ``executemany``,
  psycopg ``executemany`` in pipeline mode).

    .venv/bin/python -m bench.pg_drivers [--rounds 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import orjson
import psycopg

from proxy.store import pg_queries as q
from proxy.store.pg_migrations import apply_pg_migrations
from proxy.store.postgres import session_lock_key
from tests.support.postgres import start_server

STATE = orjson.dumps(
    {"entities": [{"path": f"/w/file{i}.py", "action": "modify"} for i in range(80)]}
).decode()
COLUMNS = (
    "id", "created_at", "session_id", "path", "model", "upstream", "stream", "status",
    "tokens_before", "tokens_after", "overhead_ms", "latency_ms", "report", "instance",
)  # fmt: skip
REPORT = orjson.dumps({"tokens": {"before": 6523, "after": 6001}, "repairs": [], "x": "y" * 1500})


def rows(batch: int, k: int) -> list[tuple[Any, ...]]:
    return [
        (f"r{k}-{i}", time.time(), f"s{i % 7}", "/v1/chat/completions", "gpt-4o", "fake", 0, 200,
         6523, 6001, 0.42, 12.5, REPORT.decode(), "bench")
        for i in range(batch)
    ]  # fmt: skip


MARKS = ", ".join(f"${i}" for i in range(1, 15))
INSERT = f"INSERT INTO requests ({', '.join(COLUMNS)}) VALUES ({MARKS})"


async def timed(n: int, fn: Callable[[int], Awaitable[None]]) -> list[float]:
    for k in range(max(20, n // 20)):  # warm-up: statements prepared, pages cached
        await fn(-k - 1)
    out = []
    for k in range(n):
        t0 = time.perf_counter()
        await fn(k)
        out.append((time.perf_counter() - t0) * 1e6)
    return out


async def with_asyncpg(url: str, n: int) -> dict[str, list[float]]:
    # as the store's pool: synchronous_commit is a connection setting
    conn = await asyncpg.connect(url, server_settings={"synchronous_commit": "off"})

    async def turn(k: int) -> None:
        sid, key = f"s{k % 50}", session_lock_key(f"s{k % 50}")
        await conn.fetchrow(q.HOLD, key, sid, -1, 10_000)
        await conn.fetchval(q.SAVE, key, sid, None, time.time(), STATE)

    async def batch(k: int) -> None:
        async with conn.transaction():
            await conn.executemany(INSERT, rows(50, k))

    try:
        return {"turn": await timed(n, turn), "batch": await timed(n // 10, batch)}
    finally:
        await conn.close()


async def with_psycopg(url: str, n: int) -> dict[str, list[float]]:
    conn = await psycopg.AsyncConnection.connect(
        url, autocommit=True, options="-c synchronous_commit=off"
    )
    hold, save = q.HOLD, q.SAVE
    for i in range(5, 0, -1):
        hold, save = hold.replace(f"${i}", "%s"), save.replace(f"${i}", "%s")
    insert = INSERT
    for i in range(14, 0, -1):
        insert = insert.replace(f"${i}", "%s")

    async def turn(k: int) -> None:
        sid, key = f"s{k % 50}", session_lock_key(f"s{k % 50}")
        cur = await conn.execute(hold, (key, sid, -1, 10_000), prepare=True)  # type: ignore[arg-type]
        await cur.fetchone()
        cur = await conn.execute(save, (key, sid, None, time.time(), STATE), prepare=True)  # type: ignore[arg-type]
        await cur.fetchone()

    async def batch(k: int) -> None:
        async with conn.transaction(), conn.cursor() as cur:
            await cur.executemany(insert, rows(50, k))  # type: ignore[arg-type]

    try:
        return {"turn": await timed(n, turn), "batch": await timed(n // 10, batch)}
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    server = start_server()
    try:
        results = {}
        for name, run in (("asyncpg", with_asyncpg), ("psycopg", with_psycopg)):
            url = server.database()

            async def prepare(url: str = url) -> None:
                conn = await asyncpg.connect(url)
                await apply_pg_migrations(conn)
                await conn.close()

            asyncio.run(prepare())
            results[name] = asyncio.run(run(url, args.rounds))
        print("| driver | session turn p50 / p95 (µs) | 50-row batch p50 / p95 (µs) |")
        print("|---|---|---|")
        for name, r in results.items():
            t, b = r["turn"], r["batch"]
            print(
                f"| {name} {_version(name)} | {statistics.median(t):.0f} / {_p95(t):.0f} | "
                f"{statistics.median(b):.0f} / {_p95(b):.0f} |"
            )
    finally:
        server.destroy()


def _p95(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.95)]


def _version(name: str) -> str:
    return str(asyncpg.__version__ if name == "asyncpg" else psycopg.__version__)


if __name__ == "__main__":
    main()
