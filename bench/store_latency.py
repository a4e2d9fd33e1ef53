"""What the store costs a request: ``ctxproxy serve`` on SQLite against the same on PostgreSQL
(a throwaway local server, ``tests.support.postgres``), in front of the bench's fake upstream;
and the throughput of two PostgreSQL replicas against one, at 64 clients.

    .venv/bin/python -m bench.store_latency [--scale 1.0]

Latency: client-observed, each proxy measured alone (the others paused with SIGSTOP), one
session per concurrent client resending its conversation. Throughput: 64 clients, 20 messages,
each client's requests alternating between the replicas (a round-robin load balancer).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson

from bench.overhead import only_running, percentile, run_load, start
from bench.workloads import agent_conversation
from tests.support.live import free_port
from tests.support.postgres import start_server


def serve(
    upstream: str, env: dict[str, str], db: str | None = None
) -> tuple[subprocess.Popen, str]:
    port = free_port()
    args = [sys.executable, "-m", "proxy.cli", "serve", "--upstream", upstream]
    args += ["--port", str(port)] + (["--db", db] if db else [])
    return start(args, f"http://127.0.0.1:{port}/healthz", env), f"http://127.0.0.1:{port}"


async def throughput(urls: list[str], body: bytes, n: int, clients: int = 64) -> float:
    """Requests per second with ``clients`` sessions, each alternating between ``urls``."""
    left, errors = [n], [0]
    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients * 2)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def worker(k: int) -> None:
            i = k
            while left[0] > 0:
                left[0] -= 1
                i += 1
                url = urls[i % len(urls)] + "/v1/chat/completions"
                own = {"content-type": "application/json", "x-session-id": f"tp-{k}"}
                try:
                    r = await client.post(url, content=body, headers=own)
                except httpx.TransportError:  # a kept-alive connection closed under us: again
                    errors[0] += 1
                    r = await client.post(url, content=body, headers=own)
                if r.status_code != 200:
                    raise RuntimeError(f"{r.status_code} {r.text[:200]}")

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(clients)))
        rate = n / (time.perf_counter() - t0)
    if errors[0]:
        print(f"({errors[0]} connections dropped and retried)", flush=True)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--messages", type=int, nargs="+", default=[20, 400])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    pg = start_server()
    tmp = Path(tempfile.mkdtemp(prefix="ctxproxy-store-bench-"))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("CTXPROXY_STORE_URL", None)
    pg_env = {**env, "CTXPROXY_STORE_URL": pg.database()}
    up_port = free_port()
    upstream = f"http://127.0.0.1:{up_port}/v1"
    procs = [
        start([sys.executable, "-m", "bench.upstream_server", str(up_port)], f"{upstream}/models")
    ]
    try:
        sqlite, sqlite_url = serve(upstream, env, str(tmp / "bench.db"))
        pg_a, pg_a_url = serve(upstream, pg_env)
        pg_b, pg_b_url = serve(upstream, pg_env)
        procs += [sqlite, pg_a, pg_b]
        servers = {"sqlite": sqlite, "postgresql": pg_a, "pg_b": pg_b}
        targets = {"sqlite": sqlite_url, "postgresql": pg_a_url}
        headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
        print("| workload | conc | SQLite p50 / p95 | PostgreSQL p50 / p95 | PG − SQLite p50 "
              "| in-proxy p50 SQLite / PG |")  # fmt: skip
        print("|---|---|---|---|---|---|")
        for size in args.messages:
            messages = agent_conversation(size)
            body = orjson.dumps({"model": "gpt-4o", "messages": messages})
            for conc in args.concurrency:
                n = int((300 if size <= 100 else 100) * (4 if conc > 1 else 1) * args.scale)
                lat: dict[str, list[float]] = {}
                inproxy: dict[str, list[float]] = {}
                for name, url in targets.items():
                    with only_running(servers, name):
                        asyncio.run(run_load(url + "/v1/chat/completions", body, 20, conc, headers))
                        inproxy[name] = []
                        lat[name] = asyncio.run(
                            run_load(
                                url + "/v1/chat/completions", body, n, conc, headers, inproxy[name]
                            )
                        )
                s, p = lat["sqlite"], lat["postgresql"]
                print(
                    f"| {size} msgs | {conc} | {percentile(s, 0.5):.2f} / "
                    f"{percentile(s, 0.95):.2f} ms"
                    f" | {percentile(p, 0.5):.2f} / {percentile(p, 0.95):.2f} ms"
                    f" | {percentile(p, 0.5) - percentile(s, 0.5):+.2f} ms"
                    f" | {statistics.median(inproxy['sqlite']):.2f} / "
                    f"{statistics.median(inproxy['postgresql']):.2f} ms |",
                    flush=True,
                )
        body = orjson.dumps({"model": "gpt-4o", "messages": agent_conversation(20)})
        n = int(2000 * args.scale)
        with only_running(servers, "sqlite"):
            one_sqlite = asyncio.run(throughput([sqlite_url], body, n))
        os.killpg(sqlite.pid, signal.SIGSTOP)
        try:
            one = asyncio.run(throughput([pg_a_url], body, n))
            two = asyncio.run(throughput([pg_a_url, pg_b_url], body, n))
        finally:
            os.killpg(sqlite.pid, signal.SIGCONT)
        print(
            f"\nthroughput at 64 clients, 20 msgs: SQLite 1 process {one_sqlite:.0f} req/s; "
            f"PostgreSQL 1 replica {one:.0f} req/s, 2 replicas {two:.0f} req/s "
            f"({two / one:.2f}×) on {os.cpu_count()} cores"
        )
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        pg.destroy()


if __name__ == "__main__":
    main()
