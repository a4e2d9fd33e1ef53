"""Cache attribution on the corpus, through a live proxy: every request's cache line
(``proxy.attribution``) checked against an emulated provider, and each session's cost line
against the benchmark's own figures for the same replay.

    .venv/bin/python -m bench.cache_attribution [--limit N] [--max-requests M] [--budget B]
                                                [--idle-share P] [--seed S] [--json out.json]

**The replay.** ``ctxproxy serve`` runs as its own process (``pricing: {ttl_s: TTL_S}`` for every
model, the budget given, the default rules) in front of an emulated upstream
(``bench.cache_emulator.PrefixCache``, one per session as ``bench.cost`` keeps them: OpenAI's
prefix cache on the forwarded body, 1,024-token minimum, 128-token steps, ``TTL_S``), which answers
each chat completion with the usage that cache gives it. Each conversation is one session, sent
request by request as an agent sends it (``tests.support.traces.request_prefixes``, the first
``--max-requests``), as ``gpt-4o``; ``--limit N`` takes every (corpus size / N)-th conversation, so
every agent of the corpus is in. Requests follow each other at once; before one (after the
first), with probability ``--idle-share``, the agent idles ``IDLE_S`` (past the TTL: a long build,
a user away), so misses by expiry occur on the same clock for the proxy and the provider.

**What is checked.** (1) *Attribution*: of the requests whose reported cached tokens fell below
the previous request's, the share whose cache line names a cause the proxy knows (expiry, the
client's change, a proxy edit) rather than ``unexplained`` or none. (2) *Cost*: per session, the
proxy's cost line (its input cost and the direct cost it estimates, in fresh tokens at gpt-4o's
r = 0.5) against the benchmark's figures for the same requests at the same times: the forwarded
lane is the emulated upstream's own ``CacheUse`` priced by ``bench.cache_emulator.Pricing`` (so it
must agree exactly), the direct lane a second ``PrefixCache`` fed the client's own bodies."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import random
import sqlite3
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
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench.cache_emulator import CacheUse, PrefixCache, Pricing, Segments
from bench.cost_lanes import _counters, _segments
from tests.support.live import free_port, serve_in_thread, stop
from tests.support.traces import iter_conversations, request_prefixes

MODEL = "gpt-4o"
READ_RATIO = 0.5  # gpt-4o's, from litellm's table: what the proxy prices with
TTL_S = 2.0
IDLE_S = 2.4
SESSION_HEADER = "x-session-id"


class EmulatedUpstream:
    """OpenAI's chat completions with an emulated prefix cache per session (by its header)."""

    def __init__(self, segments: Segments) -> None:
        self.segments = segments
        self.caches: dict[str, PrefixCache] = {}
        self.app = Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])

    async def _chat(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        session = request.headers.get(SESSION_HEADER, "-")
        cache = self.caches.setdefault(session, PrefixCache(self.segments, ttl_s=TTL_S))
        self.segments.next_request()
        use = cache.send(self.segments.of(body["messages"], body.get("tools")), time.time())
        answer = {
            "id": "chatcmpl-emulated",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": use.prompt_tokens,
                "completion_tokens": 1,
                "total_tokens": use.prompt_tokens + 1,
                "prompt_tokens_details": {"cached_tokens": use.cached_tokens},
            },
        }
        return Response(orjson.dumps(answer), media_type="application/json")


@contextlib.contextmanager
def live_proxy(upstream_url: str, budget: int | None, workdir: Path) -> Iterator[tuple[str, Path]]:
    """``ctxproxy serve`` in its own process; (its URL, its database)."""
    config = workdir / "config.yaml"
    config.write_text(
        orjson.dumps(
            {
                "upstreams": [{"name": "emulated", "match": ["*"], "base_url": upstream_url}],
                "pricing": [{"match": ["*"], "ttl_s": TTL_S}],
                "pipeline": {"budget_tokens": budget} if budget else {},
            }
        ).decode()  # JSON is YAML
    )
    port, db = free_port(), workdir / "replay.db"
    cmd = [sys.executable, "-m", "proxy.cli", "serve", "--config", str(config)]
    cmd += ["--port", str(port), "--db", str(db)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("ctxproxy serve did not start")
            time.sleep(0.1)
        yield url, db
    finally:
        proc.terminate()
        proc.wait(30)


def replay(
    url: str, conversations: list[dict[str, Any]], max_requests: int, idle: float, seed: int,
    segments: Segments,
) -> dict[str, list[CacheUse]]:  # fmt: skip
    """Send each conversation; the direct lane's usage per session, on the same clock."""
    direct: dict[str, list[CacheUse]] = {}
    with httpx.Client(timeout=120) as client:
        for conv in conversations:
            sid = f"replay-{conv['id']}"
            rng = random.Random(f"{seed}:{conv['id']}")
            lane, uses = PrefixCache(segments, ttl_s=TTL_S), direct.setdefault(sid, [])
            prefixes = list(itertools.islice(request_prefixes(conv["messages"]), max_requests))
            for i, messages in enumerate(prefixes):
                if i and rng.random() < idle:  # a long build, a user away
                    time.sleep(IDLE_S)
                segments.next_request()
                uses.append(lane.send(segments.of(messages), time.time()))
                r = client.post(
                    url + "/v1/chat/completions",
                    json={"model": MODEL, "messages": messages},
                    headers={SESSION_HEADER: sid, "authorization": "Bearer sk-replay"},
                )
                if r.status_code != 200:
                    raise RuntimeError(f"{sid} request {i}: {r.status_code} {r.text[:300]}")
    return direct


def read_rows(db: Path) -> dict[str, list[dict[str, Any]]]:
    """Each session's completed rows, in order (the log's writer flushes within a second)."""
    time.sleep(1.5)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.row_factory = sqlite3.Row
        found = conn.execute(
            "SELECT session_id, cached_tokens, prompt_tokens, cache FROM requests "
            "WHERE status = 200 ORDER BY created_at"
        ).fetchall()
    out: dict[str, list[dict[str, Any]]] = {}
    for r in found:
        row = dict(r)
        row["cache"] = orjson.loads(row["cache"]) if row["cache"] else None
        name = str(row["session_id"]).split("/", 1)[1]
        out.setdefault(name, []).append(row)
    return out


def figures(
    rows: dict[str, list[dict[str, Any]]], direct: dict[str, list[CacheUse]]
) -> dict[str, Any]:
    pricing = Pricing("gpt-4o", READ_RATIO)
    fell = attributed = 0
    causes: dict[str, int] = {}
    decisions: dict[str, int] = {}
    busts: list[tuple[float, float, Any]] = []  # each compaction: the schedule's bust, billed
    settled = {"paid_back": 0, "not_paid_back": 0}
    sessions = []
    for sid, session in rows.items():
        for before, row in itertools.pairwise(session):
            if (row["cached_tokens"] or 0) < (before["cached_tokens"] or 0):
                fell += 1
                cause = (row["cache"] or {}).get("cause") or "none"
                causes[cause] = causes.get(cause, 0) + 1
                attributed += cause in ("expiry", "client", "proxy")
                if cause == "proxy":
                    decision = str(row["cache"].get("decision"))
                    decisions[decision] = decisions.get(decision, 0) + 1
        for row in session:
            line = row["cache"] or {}
            opened = line.get("compaction")
            if opened and line.get("cause") == "proxy":  # re-billed: the two figures compared
                busts.append((opened["schedule_bust"], opened["net_bust"], line))
            for outcome in line.get("decided") or ():
                settled[outcome] = settled.get(outcome, 0) + 1
        lines = [r["cache"] for r in session if r["cache"] and "cost" in r["cache"]]
        forwarded = sum(
            pricing.cost(CacheUse(r["prompt_tokens"], r["cached_tokens"], 0)) for r in session
        )
        bench_direct = sum(pricing.cost(u) for u in direct[sid][: len(session)])
        line_cost = sum(line["cost"] for line in lines)
        line_direct = sum(line["direct_cost"] for line in lines)
        sessions.append(
            {
                "session": sid,
                "requests": len(session),
                "cost": round(line_cost),
                "bench_cost": round(forwarded),
                "direct": round(line_direct),
                "bench_direct": round(bench_direct),
                "direct_error": round(line_direct / bench_direct - 1, 4) if bench_direct else 0,
                "saving": round(1 - line_cost / line_direct, 4) if line_direct else 0,
                "bench_saving": round(1 - forwarded / bench_direct, 4) if bench_direct else 0,
            }
        )
    errors = [abs(s["direct_error"]) for s in sessions]
    total = {
        k: sum(s[k] for s in sessions) for k in ("cost", "bench_cost", "direct", "bench_direct")
    }
    return {
        "requests": sum(s["requests"] for s in sessions),
        "fell": fell,
        "attributed": attributed,
        "attributed_share": round(attributed / fell, 4) if fell else 1.0,
        "causes_of_falls": causes,
        "proxy_decisions": decisions,
        "compactions_settled": settled,
        "busts_schedule_vs_billed": {
            "compactions": len(busts),
            "schedule": round(sum(b[0] for b in busts)),
            "billed": round(sum(b[1] for b in busts)),
            "median_gap": round(statistics.median(abs(a - b) for a, b, _ in busts)) if busts else 0,
        },
        "compaction_lines": [b[2] for b in busts],
        "cost_matches_exactly": all(abs(s["cost"] - s["bench_cost"]) <= 1 for s in sessions),
        "direct_error_median": round(statistics.median(errors), 4) if errors else 0,
        "direct_error_max": round(max(errors), 4) if errors else 0,
        "total": total,
        "sessions": sessions,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=20, help="conversations (default 20)")
    ap.add_argument("--max-requests", type=int, default=40, help="per conversation (default 40)")
    ap.add_argument("--budget", type=int, default=24_000, help="the proxy's budget (0: none)")
    ap.add_argument("--idle-share", type=float, default=0.05, help="requests after an idle gap")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, help="write every figure here")
    args = ap.parse_args(argv)
    everything = list(iter_conversations())
    stride = max(1, len(everything) // max(args.limit, 1))
    conversations = everything[::stride][: args.limit]
    segments = _segments(_counters().for_model(MODEL).encoding_name)
    upstream = EmulatedUpstream(segments)
    server, upstream_url = serve_in_thread(upstream.app)
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            live_proxy(upstream_url + "/v1", args.budget or None, Path(tmp)) as (url, db),
        ):
            direct = replay(
                url, conversations, args.max_requests, args.idle_share, args.seed, segments
            )
            out = figures(read_rows(db), direct)
    finally:
        stop(server)
    summary = {k: v for k, v in out.items() if k not in ("sessions", "compaction_lines")}
    print(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
    if args.json:
        args.json.write_bytes(orjson.dumps(out, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    raise SystemExit(main())
