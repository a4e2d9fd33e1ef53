"""Each protocol's rewrite alone, in-process: thread CPU per request (ms, median) of the body
memory's read, the engine's ``prepare`` and ``finish`` and the forwarded bytes, and of the
adapter's parts in it (its lowering, its lifting, the report's protocol lines and hidden text)
and the pipeline's run, for one session resending the bench body
(``bench.overhead_protocols.bodies``) of each protocol.

    .venv/bin/python -m bench.adapter_cpu [--messages 20] [--requests 1500] [--protocols ...]
                                          [--evict-mb 32]

No HTTP, no upstream, no log row (``bench.overhead_stages`` has those): the work an adapter adds
to chat's path, steadier than the whole request's CPU on a shared machine. Two trees compare by
running this file with the other tree first on the path.

``--evict-mb N`` writes N MB of memory before each request, outside the time measured: the request
then finds the CPU's caches as after other work (a proxy whose agent waits seconds on the model
between requests, other processes running), not warm from the same request a moment before.
``floor parse``: the bare relay's one pass over the body (``orjson.loads``), timed alike in a loop
of its own."""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

import proxy.rewrite.lifting as lifting_mod
from bench.golden import settings_for
from bench.overhead_protocols import MODELS, PATHS, bodies
from proxy.rewrite.engine import Engine
from proxy.rewrite.pipeline import Pipeline
from proxy.server.heap import settle_heap
from proxy.server.wire import CHAT_WIRE, GEMINI_WIRE, MESSAGES_WIRE, RESPONSES_WIRE
from proxy.store.sqlite import Store
from proxy.tokens import TokenCounters

WIRES = {"chat": CHAT_WIRE, "messages": MESSAGES_WIRE, "responses": RESPONSES_WIRE,
         "gemini": GEMINI_WIRE}  # fmt: skip


class Timed:
    """Thread CPU (ms) of wrapped functions, summed per request."""

    def __init__(self) -> None:
        self.now: dict[str, float] = {}
        self.per: dict[str, list[float]] = {}

    def wrap(self, owner: Any, attr: str, name: str) -> Callable[[], None]:
        """Wrap ``owner.attr``; the returned call puts it back."""
        fn = getattr(owner, attr)
        now = self.now

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                now[name] = now.get(name, 0.0) + (time.thread_time() - t0) * 1000

        setattr(owner, attr, timed)
        return lambda: setattr(owner, attr, fn)

    def next_request(self, total: float) -> None:
        self.now["all"] = total
        for name, ms in self.now.items():
            self.per.setdefault(name, []).append(ms)
        self.now.clear()


async def measure(
    protocol: str, messages: int, requests: int, evict_mb: int = 0
) -> dict[str, float]:
    store = Store(":memory:", batch_window_s=0)
    await store.open()
    settings = settings_for({"pipeline": {"context_windows": {"*": 128_000}}})
    engine = Engine(settings, store, TokenCounters())
    settle_heap()
    wire = WIRES[protocol]
    raw = orjson.dumps(bodies(messages, False)[protocol])
    memory, adapter = wire.memory(), wire.adapter
    model = MODELS[protocol] if wire.target is not None else None  # Gemini's is the path's
    timed = Timed()
    undo = [
        timed.wrap(adapter, "lower", "lower"),
        timed.wrap(adapter, "lift", "lift"),
        timed.wrap(Pipeline, "run", "pipeline"),
        timed.wrap(lifting_mod, "describe_lift", "protocol lines"),
        timed.wrap(adapter, "hidden_text", "hidden text"),
    ]
    evict = bytearray(evict_mb << 20)
    try:
        for r in range(requests):
            if evict:
                evict[:] = bytes(len(evict))  # the caches as other work leaves them
            t0 = time.thread_time()
            read = memory.read(raw, "bench", "anonymous")
            assert read is not None
            body, fresh = read
            prepared = await engine.prepare(
                body, {"x-session-id": "bench"}, now=1000.0 + r, raw_size=len(raw),
                adapter=adapter, fresh=fresh, model=model,
            )  # fmt: skip
            done = await prepared.finish()
            if done.body is not body and done.data is None:
                orjson.dumps(done.body)
            timed.next_request((time.thread_time() - t0) * 1000)
    finally:
        for put_back in undo:
            put_back()
        engine.close()
        await store.close()
    skip = requests // 10  # the first requests fill the memos
    out = {name: statistics.median(ms[skip:]) for name, ms in timed.per.items()}
    parses = []
    for _ in range(requests):
        if evict:
            evict[:] = bytes(len(evict))
        t0 = time.thread_time()
        orjson.loads(raw)
        parses.append((time.thread_time() - t0) * 1000)
    out["floor parse"] = statistics.median(parses[skip:])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--protocols", nargs="+", default=list(PATHS), choices=list(PATHS))
    parser.add_argument("--evict-mb", type=int, default=0, help="memory written between requests")
    args = parser.parse_args()
    logging.getLogger("ctxproxy").setLevel(logging.CRITICAL)
    names = ["all", "lower", "pipeline", "lift", "protocol lines", "hidden text", "floor parse"]
    evicted = f", {args.evict_mb} MB written between requests" if args.evict_mb else ""
    print(f"{args.messages} messages, thread CPU ms a request (medians){evicted}\n")
    print("| protocol | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for protocol in args.protocols:
        got = asyncio.run(measure(protocol, args.messages, args.requests, args.evict_mb))
        cells = [f"{got[n]:.3f}" if n in got else "–" for n in names]
        print(f"| {protocol} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
