"""What the store costs a request: ``ctxproxy serve`` on SQLite against the same on PostgreSQL
(a throwaway local server, ``tests.support.postgres``), in front of the bench's fake upstream;
and the throughput of two PostgreSQL replicas against one, at 64 clients.

    .venv/bin/python -m bench.store_latency [--scale 1.0] [--rounds 6] [--baseline DIR]
        [--messages 20 400] [--concurrency 1 16] [--no-throughput] [--upstream-ms 0]
        [--think-ms 0] [--database-rtt-ms 0]

Latency: client-observed, each proxy measured alone (the others paused with SIGSTOP), one
session per concurrent client resending its conversation. The runs alternate between the proxies
(``--rounds`` slices each, the order flipped every round) so that a machine's load drifting
during the bench falls on all of them alike. ``--baseline DIR``: a checkout of another version
(say, the previous commit) whose PostgreSQL store is measured too, on a database of its own.
Throughput: 64 clients, 20 messages, each client's requests alternating between the replicas (a
round-robin load balancer).

``--upstream-ms N``: the upstream answers N ms after the request (0: at once, the worst case
for the store, whose save after forwarding then overlaps the answer and the next request).
``--think-ms N``: each client pauses N ms after an answer (an agent running its tool). At 0 a
session's next request comes close behind its save, so the PostgreSQL store parks the session's
connection and skips the next HOLD (``proxy.store.pg_parked``); from 10 it never does.
``--database-rtt-ms N``: the proxies reach PostgreSQL through ``bench.delay_relay``, which adds N
ms to each round trip, as a database on another host would.
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
from tests.support.postgres import PgServer, start_server

# ``python -c RUN_FROM <dir> serve ...``: the proxy of the checkout in <dir>
RUN_FROM = (
    "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
    "runpy.run_module('proxy.cli', run_name='__main__', alter_sys=True)"
)


def serve(
    upstream: str, env: dict[str, str], db: str | None = None, tree: str | None = None
) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cli = ["-c", RUN_FROM, str(Path(tree).resolve())] if tree else ["-m", "proxy.cli"]
    args = [sys.executable, *cli, "serve", "--upstream", upstream]
    args += ["--port", str(port)] + (["--db", db] if db else [])
    return start(args, f"http://127.0.0.1:{port}/healthz", env), f"http://127.0.0.1:{port}"


def cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes have used so far."""
    ticks = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def server_pids(pg: PgServer) -> list[int]:
    """The PostgreSQL server's processes: the postmaster and its children (the backends)."""
    with contextlib.suppress(OSError, ValueError):
        main = int((pg.data / "postmaster.pid").read_text().split()[0])
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == main:
                    children.append(int(stat.parent.name))
        return [main, *children]
    return []


def alternating(
    servers: dict[str, subprocess.Popen],
    targets: dict[str, str],
    body: bytes,
    n: int,
    conc: int,
    rounds: int,
    pg: PgServer,
    think_ms: float = 0.0,
) -> tuple[
    dict[str, list[float]],
    dict[str, list[float]],
    dict[str, tuple[float, float]],
    dict[str, list[float]],
]:
    """Latencies, in-proxy times, CPU ms per request (the proxy's, PostgreSQL's) and each round's
    p50 per target: ``rounds`` slices of ``n / rounds`` requests each, every target measured
    alone, the targets' order reversed every other round."""
    headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    url = {name: base + "/v1/chat/completions" for name, base in targets.items()}
    lat: dict[str, list[float]] = {name: [] for name in targets}
    inproxy: dict[str, list[float]] = {name: [] for name in targets}
    cpu = {name: [0.0, 0.0] for name in targets}
    per_round: dict[str, list[float]] = {name: [] for name in targets}
    for name in targets:  # warm-up: connections opened, statements prepared
        with only_running(servers, name):
            asyncio.run(run_load(url[name], body, 20, conc, headers))
    order, database = list(targets), server_pids(pg)
    for k in range(rounds):
        for name in order if k % 2 == 0 else order[::-1]:
            with only_running(servers, name):
                before = (cpu_s([servers[name].pid]), cpu_s(database))
                got = asyncio.run(
                    run_load(
                        url[name],
                        body,
                        max(conc, n // rounds),
                        conc,
                        headers,
                        inproxy[name],
                        think_ms,
                    )
                )
                lat[name] += got
                per_round[name].append(percentile(got, 0.5))
                cpu[name][0] += cpu_s([servers[name].pid]) - before[0]
                cpu[name][1] += cpu_s(database) - before[1]
    per_request = {name: (1000 * a / len(lat[name]), 1000 * b / len(lat[name]))
                   for name, (a, b) in cpu.items()}  # fmt: skip
    return lat, inproxy, per_request, per_round


def paired(a: list[float], b: list[float]) -> str:
    """``a`` − ``b`` paired by round (the two measured back to back, so a drift of the machine's
    speed between rounds cancels): the median of the rounds' p50 differences, and their range."""
    diffs = sorted(x - y for x, y in zip(a, b, strict=True))
    return f"{statistics.median(diffs):+.2f} ms [{diffs[0]:+.2f} … {diffs[-1]:+.2f}]"


def cell(values: list[float]) -> str:
    return f"{percentile(values, 0.5):.2f} / {percentile(values, 0.95):.2f} ms"


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
    parser.add_argument("--rounds", type=int, default=6, help="alternations per measurement")
    parser.add_argument("--baseline", help="a checkout whose PostgreSQL store is measured too")
    parser.add_argument("--no-throughput", action="store_true")
    parser.add_argument(
        "--upstream-ms", type=float, default=0.0, help="the upstream answers this much later"
    )
    parser.add_argument(
        "--think-ms", type=float, default=0.0,
        help="each client waits this long after an answer before its next request (an agent "
        "running its tool): 10 or more and no session's save parks (pg_parked.PARK_S)",
    )  # fmt: skip
    parser.add_argument(
        "--database-rtt-ms", type=float, default=0.0,
        help="reach PostgreSQL through a relay adding this round-trip time (bench.delay_relay)",
    )  # fmt: skip
    args = parser.parse_args()
    pg = start_server()
    tmp = Path(tempfile.mkdtemp(prefix="ctxproxy-store-bench-"))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("CTXPROXY_STORE_URL", None)
    database = pg.database
    relay: subprocess.Popen | None = None
    if args.database_rtt_ms:  # the proxies reach the database through the relay
        relay_port = free_port()
        relay = subprocess.Popen(
            [sys.executable, "-m", "bench.delay_relay", str(relay_port), str(pg.port),
             str(args.database_rtt_ms / 2)],
            start_new_session=True,
        )  # fmt: skip
        time.sleep(0.5)

        def database() -> str:
            return pg.database().replace(f":{pg.port}/", f":{relay_port}/")

    pg_env = {**env, "CTXPROXY_STORE_URL": database()}
    up_port = free_port()
    upstream = f"http://127.0.0.1:{up_port}/v1"
    procs = [
        start(
            [sys.executable, "-m", "bench.upstream_server", str(up_port), str(args.upstream_ms)],
            f"{upstream}/models",
        )
    ]
    try:
        sqlite, sqlite_url = serve(upstream, env, str(tmp / "bench.db"))
        pg_a, pg_a_url = serve(upstream, pg_env)
        pg_b, pg_b_url = serve(upstream, pg_env)
        procs += [sqlite, pg_a, pg_b]
        servers = {"sqlite": sqlite, "postgresql": pg_a, "pg_b": pg_b}
        targets = {"sqlite": sqlite_url, "postgresql": pg_a_url}
        if args.baseline:
            base_env = {**env, "CTXPROXY_STORE_URL": database()}
            base, base_url = serve(upstream, base_env, tree=args.baseline)
            procs.append(base)
            servers["baseline"], targets["baseline"] = base, base_url
        print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
        extra = " | PG baseline p50 / p95 (in-proxy p50) | baseline − SQLite p50"
        extra = extra if args.baseline else ""
        print("| workload | conc | SQLite p50 / p95 | PostgreSQL p50 / p95 | PG − SQLite p50 "
              f"| in-proxy p50 SQLite / PG{extra} |")  # fmt: skip
        print("|---|---|---|---|---|---|" + ("---|---|" if args.baseline else ""))
        cpu_rows, paired_rows = [], []
        for size in args.messages:
            body = orjson.dumps({"model": "gpt-4o", "messages": agent_conversation(size)})
            for conc in args.concurrency:
                n = int((300 if size <= 100 else 100) * (4 if conc > 1 else 1) * args.scale)
                lat, inproxy, cpu, rounds = alternating(
                    servers, targets, body, n, conc, args.rounds, pg, args.think_ms
                )
                s, p = lat["sqlite"], lat["postgresql"]
                row = (
                    f"| {size} msgs | {conc} | {cell(s)} | {cell(p)}"
                    f" | {percentile(p, 0.5) - percentile(s, 0.5):+.2f} ms"
                    f" | {statistics.median(inproxy['sqlite']):.2f} / "
                    f"{statistics.median(inproxy['postgresql']):.2f} ms |"
                )
                if args.baseline:
                    b = lat["baseline"]
                    row += (
                        f" {cell(b)} ({statistics.median(inproxy['baseline']):.2f} ms)"
                        f" | {percentile(b, 0.5) - percentile(s, 0.5):+.2f} ms |"
                    )
                print(row, flush=True)
                pairs = f"PG − SQLite {paired(rounds['postgresql'], rounds['sqlite'])}"
                if args.baseline:
                    pairs += f"; baseline − SQLite {paired(rounds['baseline'], rounds['sqlite'])}"
                paired_rows.append(f"| {size} msgs | {conc} | {pairs} |")
                cpu_rows.append(
                    f"| {size} msgs | {conc} | "
                    + " | ".join(f"{a:.2f} / {d:.2f}" for a, d in cpu.values())
                    + " |"
                )
        print(
            "\nPaired by round: the median of the rounds' p50 differences [their range, the "
            "noise]:\n"
        )
        print("| workload | conc | paired differences |\n|---|---|---|")
        print("\n".join(paired_rows))
        print("\nCPU ms per request, the proxy's / PostgreSQL's (all its processes):\n")
        print("| workload | conc | " + " | ".join(targets) + " |")
        print("|---|---|" + "---|" * len(targets))
        print("\n".join(cpu_rows))
        print(f"load average after: {os.getloadavg()[0]:.2f}", flush=True)
        if args.no_throughput:
            return
        body = orjson.dumps({"model": "gpt-4o", "messages": agent_conversation(20)})
        n = int(2000 * args.scale)
        with only_running(servers, "sqlite"):
            one_sqlite = asyncio.run(throughput([sqlite_url], body, n))
        others = [p for name, p in servers.items() if name not in ("postgresql", "pg_b")]
        for proc in others:
            os.killpg(proc.pid, signal.SIGSTOP)
        try:
            one = asyncio.run(throughput([pg_a_url], body, n))
            two = asyncio.run(throughput([pg_a_url, pg_b_url], body, n))
        finally:
            for proc in others:
                os.killpg(proc.pid, signal.SIGCONT)
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
        if relay is not None:
            relay.terminate()
        pg.destroy()


if __name__ == "__main__":
    main()
