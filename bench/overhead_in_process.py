"""``bench.overhead_protocols --in-process``: the protocol-dependent work of a request alone, in
this process, in thread CPU time, each protocol's body as ``bench.overhead_protocols.bodies``
makes it."""

from __future__ import annotations

import asyncio
import statistics
import time

import orjson

from bench.overhead import percentile
from bench.overhead_protocols import MODELS, bodies


def in_process(
    sizes: list[int], reps: int, window: int, grow: bool = False, rules_cpu: bool = False
) -> None:
    """The protocol-dependent part of a request alone, in this process, in thread CPU time (what a
    shared machine's scheduling does not inflate): parse and validate the body, ``Engine.rewrite``
    (lower, rules, lift, the final checks), serialise what is forwarded. Protocols alternate. The
    garbage collector is set as the server sets it (``proxy.server.heap``). With ``grow``, each
    request carries the previous one's messages and two more, as an agent's do, so what the
    proxy keeps across requests is used as real traffic uses it. With ``rules_cpu``, the rules'
    timings (the report's ``timings_ms``) are read from the thread's CPU clock: the pipeline's
    clock is swapped for ``time.thread_time`` in this process."""
    import logging
    import types

    import proxy.rewrite.pipeline as pipeline
    from bench.golden import settings_for
    from proxy.rewrite.engine import Engine
    from proxy.server.heap import settle_heap
    from proxy.server.wire import CHAT_WIRE, GEMINI_WIRE, MESSAGES_WIRE, RESPONSES_WIRE
    from proxy.store.sqlite import Store
    from proxy.tokens import TokenCounters

    logging.getLogger("ctxproxy").setLevel(logging.CRITICAL)
    if rules_cpu:
        pipeline.time = types.SimpleNamespace(perf_counter=time.thread_time)  # type: ignore[assignment]
    # the server's own readers (each protocol's body memory: parse and validate) and adapters
    wires = {
        name: (wire.memory(), wire.adapter)
        for name, wire in (
            ("chat", CHAT_WIRE),
            ("messages", MESSAGES_WIRE),
            ("responses", RESPONSES_WIRE),
            ("gemini", GEMINI_WIRE),
        )
    }

    async def run() -> None:
        store = Store(":memory:", batch_window_s=0)
        await store.open()
        engine = Engine(
            settings_for({"pipeline": {"context_windows": {"*": window}}}), store, TokenCounters()
        )
        settle_heap()  # the garbage collector as ``ctxproxy serve`` sets it
        by_rule: dict[int, dict[str, list[float]]] = {}
        print("| workload | protocol | CPU ms per request, median (p10–p90) | − chat |")
        print("|---|---|---|---|")
        try:
            for n_msgs in sizes:
                count = reps + 5
                shorter = [2 * (count - 1 - r) if grow else 0 for r in range(count)]
                lengths = [max(4, n_msgs - k) for k in shorter]
                encoded = {m: {p: orjson.dumps(b) for p, b in bodies(m, False).items()}
                           for m in dict.fromkeys(lengths)}  # fmt: skip
                cpu: dict[str, list[float]] = {p: [] for p in encoded[n_msgs]}
                rules: dict[str, list[float]] = {}  # chat's, the report's ``timings_ms``
                for r in range(count):
                    for protocol, raw in encoded[lengths[r]].items():
                        memory, adapter = wires[protocol]
                        session = f"cpu-{n_msgs}-{protocol}"
                        t0 = time.thread_time()
                        body = memory.parse(raw, session)
                        model = MODELS["gemini"] if protocol == "gemini" else None
                        done = await engine.rewrite(
                            body, {}, now=1000.0 + r, session_id=session, adapter=adapter,
                            model=model,
                        )  # fmt: skip
                        if done.body is not body and done.data is None:  # as the server does
                            orjson.dumps(done.body)
                        if r >= 5:  # the first requests fill the session and the caches
                            cpu[protocol].append((time.thread_time() - t0) * 1000)
                            if protocol == "chat":
                                for rule, ms in done.report["timings_ms"].items():
                                    rules.setdefault(rule, []).append(ms)
                chat = statistics.median(cpu["chat"])
                for protocol, values in cpu.items():
                    med = statistics.median(values)
                    lo, hi = percentile(values, 0.1), percentile(values, 0.9)
                    delta = "—" if protocol == "chat" else f"{med - chat:+.2f} ms"
                    spread = f"{med:.2f} ms ({lo:.2f}–{hi:.2f})"
                    print(f"| {n_msgs} msgs | {protocol} | {spread} | {delta} |")
                by_rule[n_msgs] = rules
            print_rules(by_rule)
        finally:
            engine.close()
            await store.close()

    asyncio.run(run())


def print_rules(by_rule: dict[int, dict[str, list[float]]]) -> None:
    """Chat's rules, each workload's median and mean (wall ms, the report's ``timings_ms``):
    the mean holds prune's periodic looks for a compaction, the median the common request."""
    sizes = list(by_rule)
    print()
    print("| rule (chat) | " + " | ".join(f"{n} msgs, median / mean µs" for n in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    first = by_rule[sizes[0]] if sizes else {}
    order = sorted(first, key=lambda r: -statistics.median(first[r]))
    for rule in order:
        cells = []
        for n in sizes:
            values = by_rule[n].get(rule) or [0.0]
            med, mean = statistics.median(values) * 1000, statistics.mean(values) * 1000
            cells.append(f"{med:.0f} / {mean:.0f}")
        print(f"| {rule} | " + " | ".join(cells) + " |")
