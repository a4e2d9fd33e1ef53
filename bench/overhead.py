"""Added latency of the proxy (every rule on) in front of a fake upstream on loopback, against
calling that upstream directly, beside the floor (``bench.bare_relay``: the same server stack,
upstream client and forwarding, nothing of ctxproxy's own), and against LiteLLM's proxy when one
is installed.

    .venv/bin/python -m bench.overhead [--litellm /path/to/litellm] [--scale 1.0]

Each target runs in its own process; the client sends pre-encoded bodies with httpx. Figures are
client-observed latency to the full response; "added" is target − direct at the same percentile.
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.workloads import agent_conversation
from tests.support.live import free_port

ROOT = Path(__file__).resolve().parents[1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def start(args: list[str], ready_url: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    # stderr to a file, not a pipe: the proxy logs a JSON line per request and a full pipe blocks
    log = tempfile.NamedTemporaryFile(prefix="ctxproxy-bench-", suffix=".log", delete=False)  # noqa: SIM115 (the child writes to it after we return)
    # its own process group: pausing and stopping it reaches the workers it spawns too
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        env=env or os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if httpx.get(ready_url, timeout=1).status_code < 500:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"{args[0]} exited: {Path(log.name).read_text()[-2000:]}")
        time.sleep(0.2)
    raise RuntimeError(f"{args} did not become ready")


async def run_load(
    url: str,
    body: bytes,
    n: int,
    concurrency: int,
    headers: dict[str, str],
    overheads: list[float] | None = None,
    think_ms: float = 0.0,
) -> list[float]:
    """Each worker's latencies; ``think_ms``: a pause after each answer before the worker's next
    request (an agent running its tool), not counted in the latency."""
    latencies: list[float] = []
    queue = list(range(n))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def worker(k: int) -> None:
            # each concurrent worker is its own agent session, as 16 agents would be
            own = {**headers, "x-session-id": f"bench-{k}"}
            while queue:
                queue.pop()
                t0 = time.perf_counter()
                r = await client.post(url, content=body, headers=own)
                await r.aread()
                latencies.append((time.perf_counter() - t0) * 1000)
                if r.status_code != 200:
                    raise RuntimeError(f"{url}: {r.status_code} {r.text[:300]}")
                if overheads is not None and "x-ctxproxy-overhead-ms" in r.headers:
                    overheads.append(float(r.headers["x-ctxproxy-overhead-ms"]))
                if think_ms:
                    await asyncio.sleep(think_ms / 1000)

        await asyncio.gather(*(worker(k) for k in range(concurrency)))
    return latencies


@contextlib.contextmanager
def only_running(servers: dict[str, subprocess.Popen], name: str) -> Iterator[None]:
    """Pause every server but ``name`` (SIGSTOP to its process group, so a server's worker
    processes pause too) while it is measured, then resume them."""
    paused = [p for n, p in servers.items() if n != name]
    for p in paused:
        os.killpg(p.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for p in paused:
            os.killpg(p.pid, signal.SIGCONT)


def litellm_config(upstream: str) -> str:
    return (
        "model_list:\n"
        "  - model_name: gpt-4o\n"
        "    litellm_params:\n"
        "      model: openai/gpt-4o\n"
        f"      api_base: {upstream}\n"
        "      api_key: sk-bench\n"
        "litellm_settings:\n  drop_params: true\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--litellm", help="path to a LiteLLM proxy executable (litellm[proxy])")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply request counts")
    parser.add_argument(
        "--messages", type=int, nargs="+", default=[20, 400], help="workload sizes (messages)"
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="ctxproxy-bench-"))
    up_port, px_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}/v1"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    procs = [
        start([sys.executable, "-m", "bench.upstream_server", str(up_port)], f"{upstream}/models")
    ]
    ctxproxy = start(
        [
            sys.executable,
            "-m",
            "proxy.cli",
            "serve",
            "--upstream",
            upstream,
            "--port",
            str(px_port),
            "--db",
            str(tmp / "bench.db"),
        ],
        f"http://127.0.0.1:{px_port}/healthz",
        env,
    )
    procs.append(ctxproxy)
    # the floor (``bench.bare_relay``): the same server stack, upstream client and forwarding
    fl_port = free_port()
    floor = start(
        [sys.executable, "-m", "bench.bare_relay", "--upstream", upstream, "--port", str(fl_port)],
        f"http://127.0.0.1:{fl_port}/healthz",
        env,
    )
    procs.append(floor)
    # Each target is measured alone: the other proxies are paused (SIGSTOP) meanwhile, so one's
    # background work (LiteLLM runs periodic tasks) never lands on another's figures.
    servers: dict[str, subprocess.Popen] = {"ctxproxy": ctxproxy, "floor": floor}
    targets = {
        "direct": f"{upstream}/chat/completions",
        "ctxproxy": f"http://127.0.0.1:{px_port}/v1/chat/completions",
        "floor": f"http://127.0.0.1:{fl_port}/v1/chat/completions",
    }
    if args.litellm:
        ll_port = free_port()
        cfg = tmp / "litellm.yaml"
        cfg.write_text(litellm_config(upstream))
        # its proxy refuses to start without a master key unless told this is a local test
        ll_env = {**env, "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true"}
        litellm = start(
            [
                args.litellm,
                "--config",
                str(cfg),
                "--host",
                "127.0.0.1",
                "--port",
                str(ll_port),
                "--num_workers",
                "1",
            ],
            f"http://127.0.0.1:{ll_port}/health/liveliness",
            ll_env,
        )
        procs.append(litellm)
        servers["litellm"] = litellm
        targets["litellm"] = f"http://127.0.0.1:{ll_port}/v1/chat/completions"

    workloads = {f"{n} msgs": agent_conversation(n) for n in args.messages}
    from proxy.tokens import TiktokenCounter

    counter = TiktokenCounter("o200k_base")
    rows: list[dict[str, Any]] = []
    try:
        for wname, messages in workloads.items():
            tokens = counter.count_messages(messages)
            for stream in (False, True):
                body = orjson.dumps({"model": "gpt-4o", "messages": messages, "stream": stream})
                for conc in args.concurrency:
                    n = int(
                        (300 if len(messages) <= 100 else 100) * (4 if conc > 1 else 1) * args.scale
                    )
                    results: dict[str, list[float]] = {}
                    overheads: list[float] = []
                    for tname, url in targets.items():
                        headers = {
                            "content-type": "application/json",
                            "authorization": "Bearer sk-bench",
                        }
                        with only_running(servers, tname):
                            asyncio.run(run_load(url, body, max(10, n // 10), conc, headers))
                            results[tname] = asyncio.run(
                                run_load(
                                    url,
                                    body,
                                    n,
                                    conc,
                                    headers,
                                    overheads if tname == "ctxproxy" else None,
                                )
                            )
                    row = {
                        "workload": f"{wname} ({len(messages)} msgs, {tokens} tok)",
                        "stream": stream,
                        "concurrency": conc,
                        "n": n,
                    }
                    for q in (0.5, 0.95, 0.99):
                        base = percentile(results["direct"], q)
                        for tname in targets:
                            if tname != "direct":
                                row[f"{tname}_p{int(q * 100)}"] = (
                                    percentile(results[tname], q) - base
                                )
                        row[f"direct_p{int(q * 100)}"] = base
                    row["ctxproxy_overhead_header_p50"] = statistics.median(overheads)
                    rows.append(row)
                    print(orjson.dumps(row).decode(), flush=True)
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGCONT)
                os.killpg(p.pid, signal.SIGTERM)
            p.wait(10)
    print_table(rows, "litellm" in targets)


def print_table(rows: list[dict[str, Any]], with_litellm: bool) -> None:
    head = (
        "| workload | stream | conc | direct p50 | ctxproxy added p50 / p95 / p99 | in-proxy p50 "
        "| floor added p50 / p99 | ctxproxy − floor (p50) |"
    )
    if with_litellm:
        head += " LiteLLM added p50 / p95 / p99 | ratio p50 |"
    print("\n" + head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        line = (
            f"| {r['workload']} | {'yes' if r['stream'] else 'no'} | {r['concurrency']} | "
            f"{r['direct_p50']:.2f} ms | {r['ctxproxy_p50']:.2f} / {r['ctxproxy_p95']:.2f} / "
            f"{r['ctxproxy_p99']:.2f} ms | {r['ctxproxy_overhead_header_p50']:.2f} ms | "
            f"{r['floor_p50']:.2f} / {r['floor_p99']:.2f} ms | "
            f"{r['ctxproxy_p50'] - r['floor_p50']:+.2f} ms |"
        )
        if with_litellm:
            ratio = r["litellm_p50"] / max(r["ctxproxy_p50"], 0.01)
            line += (
                f" {r['litellm_p50']:.2f} / {r['litellm_p95']:.2f} / "
                f"{r['litellm_p99']:.2f} ms | {ratio:.0f}× |"
            )
        print(line)


if __name__ == "__main__":
    main()
