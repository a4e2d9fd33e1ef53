"""Store growth: what a day of 10 requests/s costs the request log, in rows and bytes, with and
without ``store.capture_payloads``; and what one session's state costs.

    .venv/bin/python -m bench.store_growth                  # 864,000 rows (a day at 10/s)
    .venv/bin/python -m bench.store_growth --rows 100000    # a quicker look
    .venv/bin/python -m bench.store_growth --json           # the figures as JSON

The rows are real: conversations of the trace corpus are replayed prefix by prefix through the
real engine (every rule on, gpt-4o's tokenizer), and each step's log row is built as the server
builds it (sections, the rule report, usage, timings), then written through the SQLite store's
writer task into a temporary file. The sample rows repeat, with new ids and sessions, until the
day is full; ``created_at`` advances 0.1 s a row. Payload rows (the client's body, the forwarded
one and the answer, redacted) are far larger: ``--payload-rows`` of them are written and the day
is extrapolated from their measured size per row. Sizes are the database file after a WAL
checkpoint (tables and indexes), divided by the rows. Not run in CI (tests run it on 1,000 rows).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from bench.golden import settings_for
from proxy.rewrite.engine import Engine
from proxy.store.retention import DAY_S
from proxy.store.sqlite import Store
from proxy.tokens import TokenCounters
from rules.redact import redact
from tests.support.traces import iter_conversations, request_prefixes

RATE = 10.0  # requests per second
DAY_ROWS = int(RATE * DAY_S)  # 864,000
STEP_S = 7.0  # the replay's clock: seconds between two requests of a session


async def sample_rows(
    conversations: int, max_steps: int | None = None
) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], list[int]]:
    """(row, payload columns) per replayed request, and each session's final state size."""
    convs = list(iter_conversations())
    step = max(1, len(convs) // max(1, conversations))
    chosen = convs[::step][:conversations]
    store = Store(":memory:", batch_window_s=0)
    await store.open()
    engine = Engine(settings_for({"pipeline": {"on_rule_error": "skip"}}), store, TokenCounters())
    rows: list[tuple[dict[str, Any], dict[str, Any]]] = []
    states: list[int] = []
    try:
        for conv in chosen:
            sid = f"bench-{conv['id']}"
            now = 1_700_000_000.0
            messages = conv["messages"]
            for prefix in itertools.islice(request_prefixes(messages), max_steps):
                now += STEP_S
                body = {"model": "gpt-4o", "messages": prefix, "stream": True}
                started = time.perf_counter()
                done = await engine.rewrite(body, {}, now=now, session_id=sid)
                overhead_ms = (time.perf_counter() - started) * 1000
                rows.append((_row(done, body, overhead_ms), _payloads(body, done.body, messages)))
            state, _ = await store.load_state(sid)
            states.append(len(orjson.dumps(state.to_json())))
    finally:
        engine.close()
        await store.close()
    return rows, states


def _row(done: Any, body: dict[str, Any], overhead_ms: float) -> dict[str, Any]:
    """The row as ``proxy.server`` queues it and completes it (a streamed 200)."""
    report = done.report
    prompt = report["tokens"]["after"]
    cached = int(prompt * 0.8)
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": 180,
        "total_tokens": prompt + 180,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    return {
        "path": "/v1/chat/completions",
        "protocol": "chat",
        "model": body["model"],
        "stream": 1,
        "parent_session_id": done.parent_session_id,
        "upstream": "openai",
        "tokens_before": report["tokens"]["before"],
        "tokens_after": prompt,
        "sections": report.get("sections"),
        "report": report,
        "overhead_ms": round(overhead_ms, 3),
        "status": 200,
        "latency_ms": 2_841.512,
        "ttfb_ms": 612.004,
        "client_disconnected": 0,
        "usage": usage,
        "prompt_tokens": prompt,
        "completion_tokens": 180,
        "cached_tokens": cached,
    }


def _payloads(
    body: dict[str, Any], forwarded: dict[str, Any], messages: list[dict[str, Any]]
) -> dict[str, Any]:
    """What ``capture_payloads`` adds: both bodies and the answer (the trace's next message)."""
    answer = messages[len(body["messages"])] if len(body["messages"]) < len(messages) else {}
    response = {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "model": body["model"],
        "choices": [{"index": 0, "message": answer, "finish_reason": "stop"}],
    }
    return {
        "request_body": orjson.dumps(redact(body)).decode(),
        "forwarded_body": orjson.dumps(redact(forwarded)).decode(),
        "response_body": orjson.dumps(redact(response)).decode(),
    }


async def write_rows(
    path: Path, samples: list[tuple[dict[str, Any], dict[str, Any]]], n: int, payloads: bool
) -> float:
    """Write ``n`` rows through the store's writer task; seconds taken."""
    store = Store(str(path))
    await store.open()
    started = time.perf_counter()
    t0 = 1_700_000_000.0
    per_session = 60  # requests before the next session id (the corpus' median is about that)
    try:
        for i in range(n):
            row, extra = samples[i % len(samples)]
            out = {**row, "id": "req_" + uuid.uuid4().hex[:24], "created_at": t0 + i / RATE}
            out["session_id"] = f"s{i // per_session}"
            if payloads:
                out.update(extra)
            await store.insert_request(out)
            if i % 2_000 == 1_999:
                await store.flush()  # bounded memory: the queue never holds more than that
        await store.flush()
    finally:
        await store.close()
    return time.perf_counter() - started


async def time_prune(path: Path, rows: int) -> dict[str, Any]:
    """Prune the older half of the rows as the periodic task does; how long the writer task is
    busy per step (what a request row queued meanwhile can wait at most, beyond the batch
    window) and in all."""
    store = Store(str(path))
    await store.open()
    busy: list[float] = []
    in_writer = store.in_writer

    async def timed(fn: Any) -> Any:
        async def run(db: Any) -> Any:
            started = time.perf_counter()
            try:
                return await fn(db)
            finally:
                busy.append(time.perf_counter() - started)

        return await in_writer(run)

    store.in_writer = timed  # type: ignore[method-assign]
    started = time.perf_counter()
    try:
        counts = await store.prune(1_700_000_000.0 + rows / 2 / RATE, 0.0)
    finally:
        await store.close()
    busy.sort()
    return {
        "deleted": counts["requests"],
        "seconds": round(time.perf_counter() - started, 2),
        "steps": len(busy),
        "step_ms_p50": round(busy[len(busy) // 2] * 1000, 2) if busy else 0.0,
        "step_ms_max": round(busy[-1] * 1000, 2) if busy else 0.0,
    }


def measure(path: Path) -> dict[str, Any]:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = db.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
        columns = db.execute(
            "SELECT SUM(length(report)), SUM(length(sections)), SUM(length(usage)), "
            "SUM(length(request_body)), SUM(length(forwarded_body)), SUM(length(response_body)) "
            "FROM requests"
        ).fetchone()
        tables: dict[str, int] = {}
        try:
            for name, size in db.execute(
                "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
            ):
                tables[name] = int(size)
        except sqlite3.OperationalError:  # no dbstat in this SQLite build
            pass
    size = path.stat().st_size
    names = ("report", "sections", "usage", "request_body", "forwarded_body", "response_body")
    return {
        "rows": rows,
        "file_bytes": size,
        "bytes_per_row": size / rows if rows else 0.0,
        "column_bytes_per_row": {k: (v or 0) / rows for k, v in zip(names, columns, strict=True)},
        "objects_bytes": tables,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    samples, states = asyncio.run(sample_rows(args.conversations, args.max_steps))
    replay_s = time.perf_counter() - started
    out: dict[str, Any] = {
        "sample": {
            "conversations": len(states),
            "rows": len(samples),
            "replay_s": round(replay_s, 1),
            "state_bytes_mean": sum(states) / len(states) if states else 0,
            "state_bytes_max": max(states, default=0),
        }
    }
    with tempfile.TemporaryDirectory(prefix="ctxproxy-growth-") as tmp:
        for name, n, payloads in (
            ("log", args.rows, False),
            ("log_with_payloads", args.payload_rows, True),
        ):
            path = Path(tmp) / f"{name}.db"
            seconds = asyncio.run(write_rows(path, samples, n, payloads))
            m = measure(path)
            m["write_s"] = round(seconds, 1)
            m["rows_per_s"] = round(n / seconds) if seconds else 0
            m["bytes_per_day"] = m["bytes_per_row"] * DAY_ROWS
            m["prune"] = asyncio.run(time_prune(path, n))
            out[name] = m
            for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                leftover.unlink(missing_ok=True)
    return out


def _mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB" if n < 1e9 else f"{n / 1e9:,.1f} GB"


def report(out: dict[str, Any]) -> str:
    s = out["sample"]
    lines = [
        f"sample: {s['rows']:,} real rows from {s['conversations']} replayed conversations "
        f"({s['replay_s']} s); session state {s['state_bytes_mean']:,.0f} bytes on average, "
        f"{s['state_bytes_max']:,} at most",
        "",
        "| capture_payloads | rows written | bytes/row | a day at 10 req/s (864,000 rows) "
        "| 30 days (retention_days default) | write rate |",
        "|---|---|---|---|---|---|",
    ]
    for name, flag in (("log", "false"), ("log_with_payloads", "true")):
        m = out[name]
        lines.append(
            f"| {flag} | {m['rows']:,} | {m['bytes_per_row']:,.0f} | "
            f"{_mb(m['bytes_per_day'])} | {_mb(m['bytes_per_day'] * 30)} | "
            f"{m['rows_per_s']:,} rows/s |"
        )
    for name in ("log", "log_with_payloads"):
        p = out[name]["prune"]
        lines.append(
            f"\n{name}: pruning {p['deleted']:,} rows took {p['seconds']} s in {p['steps']} "
            f"steps; the writer task was busy {p['step_ms_p50']} ms per step (p50), "
            f"{p['step_ms_max']} ms at most"
        )
        cols = out[name]["column_bytes_per_row"]
        parts = ", ".join(f"{k} {v:,.0f}" for k, v in cols.items() if v)
        lines.append(f"\n{name}: JSON/text bytes per row: {parts}")
        objects = out[name]["objects_bytes"]
        if objects:
            rows, total = out[name]["rows"], sum(objects.values())
            lines.append(
                "  per row by object: "
                + ", ".join(f"{k} {v / rows:,.0f}" for k, v in objects.items() if v >= total / 100)
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=DAY_ROWS, help="rows without payloads")
    parser.add_argument("--payload-rows", type=int, default=20_000, help="rows with payloads")
    parser.add_argument("--conversations", type=int, default=30, help="conversations replayed")
    parser.add_argument("--max-steps", type=int, default=None, help="requests per conversation")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.getLogger("ctxproxy").setLevel(logging.ERROR)
    out = run(args)
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() if args.json else report(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
