"""The garbage collector's pauses in a long-running server, with the collector and without it.

    .venv/bin/python -m bench.collector_pauses [--rounds 2] [--max-requests 60] [--variants V,…]
    .venv/bin/python -m bench.collector_pauses --app 500   # cycles kept, through the app

Each variant runs in a fresh process: the corpus's conversations replayed request by request
through the real engine (chat, every turn, each conversation a session; ``--rounds`` times, each
round new sessions), the garbage collector set as ``ctxproxy serve`` sets it (``settle_heap``),
with (``collector``) or without (``base``) ``proxy.server.collector``, its reclaims run between
requests as the server's observer runs them. Every collection is timed from its ``gc.callbacks``
start to its stop, in the thread's CPU time (a shared machine's preemption left out): per
generation, how many, the longest, the 99th percentile and the sum; the reclaims; what is frozen
and tracked at the end and the session memos' size (bounded at 64 MB). Last, one full collection
of everything (unfrozen first): what a full collection costs over that heap, and how much of it
was garbage that freezing had kept (cycles).

``--app N``: instead, N requests of each protocol, streamed and not, through the app as ``ctxproxy
serve`` sets it up (its setup hooks, the collector observing its requests), called as an ASGI app
in this process with ``bench.upstream_server`` on loopback, 50 sessions each (the bench's
20-message bodies): then everything unfrozen and collected once, to count the cycles freezing
kept."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import resource
import subprocess
import sys
import time
from typing import Any


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def run_variant(variant: str, rounds: int, max_requests: int) -> dict[str, Any]:
    import orjson

    from bench.golden import settings_for
    from proxy.rewrite.engine import Engine
    from proxy.server.collector import Collector
    from proxy.server.heap import settle_heap
    from proxy.server.wire import CHAT_WIRE
    from proxy.store.sqlite import Store
    from proxy.tokens import TokenCounters
    from tests.support.traces import iter_conversations, request_prefixes

    logging.getLogger("ctxproxy").setLevel(logging.CRITICAL)
    pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
    began = [0.0]

    def timer(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[0] = time.thread_time()
        else:
            pauses[info["generation"]].append((time.thread_time() - began[0]) * 1000)

    async def replay() -> dict[str, Any]:
        store = Store(":memory:", batch_window_s=0)
        await store.open()
        engine = Engine(settings_for({}), store, TokenCounters())
        settle_heap()
        collector = Collector(young_at_lull=variant == "collector") if variant != "base" else None
        gc.callbacks.insert(0, timer)  # before the collector's: its freeze is not timed
        if collector is not None:
            collector.install()
        memory = CHAT_WIRE.memory()
        conversations = list(iter_conversations())
        requests, started = 0, time.perf_counter()
        reclaim_ms: list[float] = []
        try:
            for round_ in range(rounds):
                for conv in conversations:
                    prefixes = list(request_prefixes(conv["messages"]))
                    sid = f"{conv['id']}#{round_}"
                    for prefix in prefixes[:max_requests] if max_requests else prefixes:
                        raw = orjson.dumps({"model": "gpt-4o", "messages": prefix})
                        if collector is not None:
                            collector.started()
                        await engine.rewrite(
                            memory.parse(raw, sid), {}, now=1000.0 + requests, session_id=sid,
                            adapter=CHAT_WIRE.adapter, model=None,
                        )  # fmt: skip
                        if collector is not None:
                            before = collector.reclaims
                            t0 = time.thread_time()
                            collector.finished({})
                            if collector.reclaims > before:
                                reclaim_ms.append((time.thread_time() - t0) * 1000)
                        requests += 1
            elapsed = time.perf_counter() - started
        finally:
            gc.callbacks.remove(timer)
            if collector is not None:
                collector.uninstall()
        figures: dict[str, Any] = {
            "variant": variant,
            "requests": requests,
            "elapsed_s": round(elapsed, 1),
            "reclaims": len(reclaim_ms),
            "reclaim_ms_max": round(max(reclaim_ms), 1) if reclaim_ms else 0.0,
            "frozen": gc.get_freeze_count(),
            "tracked": len(gc.get_objects()),
            "memos_mb": round(
                (engine.pipeline.memos.held_bytes if engine.pipeline.memos else 0) / 1e6, 1
            ),
            "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        }
        every = [v for values in pauses.values() for v in values]
        figures["over_10ms"] = sum(v >= 10 for v in every)
        figures["over_50ms"] = sum(v >= 50 for v in every)
        for gen, values in pauses.items():
            figures[f"gen{gen}"] = {
                "runs": len(values),
                "max_ms": round(max(values, default=0.0), 1),
                "p99_ms": round(_pct(values, 0.99), 1),
                "sum_ms": round(sum(values)),
            }
        gc.unfreeze()
        t0 = time.thread_time()
        figures["full_collection_collected"] = gc.collect()
        figures["full_collection_ms"] = round((time.thread_time() - t0) * 1000)
        engine.close()
        await store.close()
        return figures

    return asyncio.run(replay())


def run_app(n: int) -> None:
    """``--app``: cycles the collector's freezing keeps from requests through the whole app."""
    from pathlib import Path

    import orjson

    from bench.overhead_protocols import bodies, ctxproxy_config, path_of
    from bench.overhead_stages import WINDOW, beside_upstream, call

    async def through(tmp: Path, root: str) -> None:
        from proxy.app import create_app
        from proxy.server.collector import install_collector
        from proxy.server.heap import settle_heap
        from proxy.settings import load_settings

        cfg = tmp / "ctxproxy.yaml"
        cfg.write_text(ctxproxy_config(root, WINDOW))
        app = create_app(load_settings(cfg), db_path=str(tmp / "bench.db"))
        app.state.log_stream = (tmp / "requests.log").open("w", buffering=1)
        app.state.setup_hooks += [settle_heap, install_collector]
        async with app.router.lifespan_context(app):
            frozen = gc.get_freeze_count()
            for protocol in ("chat", "messages", "responses", "gemini"):
                for stream in (False, True):
                    body = orjson.dumps(bodies(20, stream)[protocol])
                    for r in range(n):
                        await call(app, path_of(protocol, stream), body, f"{protocol}-{r % 50}")
            await app.state.services.store.flush()
            collector = app.state.collector
            collector.uninstall()
            after = gc.get_freeze_count()
            gc.unfreeze()
            garbage = gc.collect()
            print(
                f"{8 * n:,} requests: frozen {frozen:,} → {after:,}, {collector.reclaims} "
                f"reclaims; one full collection of everything then: {garbage:,} unreachable"
            )

    logging.getLogger("ctxproxy").setLevel(logging.CRITICAL)
    beside_upstream("ctxproxy-collector-", through)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-requests", type=int, default=60, help="per conversation; 0: all")
    parser.add_argument(
        "--variants", default="base,collector", help="base, collector, freeze-only (no lulls)"
    )
    parser.add_argument("--app", type=int, help="requests of each protocol through the app")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a variant, in this process
    args = parser.parse_args()
    if args.app:
        run_app(args.app)
        return
    if args.one:
        print(json.dumps(run_variant(args.one, args.rounds, args.max_requests)))
        return
    print("| variant | requests | gen0 runs · max · p99 · sum ms | gen1 | gen2 | over 10 · 50 ms "
          "| reclaims (longest) | frozen · tracked at the end | memos | a full collection then "
          "(garbage) | replay |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for variant in args.variants.split(","):
        out = subprocess.run(
            [sys.executable, "-m", "bench.collector_pauses", "--one", variant, "--rounds",
             str(args.rounds), "--max-requests", str(args.max_requests)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        f = json.loads(out.stdout.strip().splitlines()[-1])
        gens = [
            f"{g['runs']} · {g['max_ms']} · {g['p99_ms']} · {g['sum_ms']}"
            for g in (f["gen0"], f["gen1"], f["gen2"])
        ]
        print(
            f"| {variant} | {f['requests']:,} | {' | '.join(gens)} | {f['over_10ms']} · "
            f"{f['over_50ms']} | {f['reclaims']} "
            f"({f['reclaim_ms_max']} ms) | {f['frozen']:,} · {f['tracked']:,} | {f['memos_mb']} MB "
            f"| {f['full_collection_ms']} ms ({f['full_collection_collected']:,}) "
            f"| {f['elapsed_s']} s |"
        )


if __name__ == "__main__":
    main()
