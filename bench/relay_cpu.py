"""A streamed answer's relay, alone: thread CPU per answer (µs, median) of ``relay_stream`` for
each protocol's stream as ``bench.upstream_server`` sends it (five text deltas, and each
protocol's usage events), arriving in one piece and one event a piece.

    .venv/bin/python -m bench.relay_cpu [--answers 4000]

In-process, no HTTP: the relay's loop, the usage tap (``proxy.upstream.sse_usage``), the cache
feedback it notes (a real store's) and the answer-end watch; the log row's fields and completion
are stubbed (``bench.overhead_stages`` times those). Steadier than the whole request's CPU on a
shared machine: two trees compare by running this file with the other tree first on the path."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from bench.upstream_server import CHAT_STREAM, GEMINI_STREAM, MESSAGES_STREAM, RESPONSES_STREAM
from proxy.server.stream_relay import relay_stream
from proxy.store.sqlite import Store
from proxy.upstream import UpstreamResponse

STREAMS = {"chat": CHAT_STREAM, "messages": MESSAGES_STREAM, "responses": RESPONSES_STREAM,
           "gemini": GEMINI_STREAM}  # fmt: skip


async def _pieces(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


async def run(answers: int) -> None:
    store = Store(":memory:", batch_window_s=0)
    await store.open()
    settings = SimpleNamespace(store=SimpleNamespace(capture_payloads=False))
    services = SimpleNamespace(store=store, settings=settings, engine=SimpleNamespace(ledger=None))

    async def finish(row: dict[str, Any], fields: dict[str, Any]) -> None:
        return None

    async def send(message: dict[str, Any]) -> None:
        return None

    handler = SimpleNamespace(s=services, _fields=lambda *a, **k: {}, _finish=finish)
    watch = SimpleNamespace(stop=lambda: None, ours=lambda: False)
    print("| protocol | one piece | one event a piece |\n|---|---|---|")
    for name, events in STREAMS.items():
        medians = []
        for pieces in ([b"".join(events)], events):
            cpu = []
            for r in range(answers):
                response = UpstreamResponse(200, {}, chunks=_pieces(pieces))
                row = {"id": "r", "session_id": f"s{r % 50}", "created_at": float(r)}
                t0 = time.thread_time()
                await relay_stream(handler, send, response, row, 0.0, {}, watch)  # type: ignore[arg-type]
                cpu.append((time.thread_time() - t0) * 1e6)
            medians.append(statistics.median(cpu[answers // 8 :]))
        print(f"| {name} | {medians[0]:.1f} | {medians[1]:.1f} |")
    await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=4000)
    asyncio.run(run(parser.parse_args().answers))


if __name__ == "__main__":
    main()
