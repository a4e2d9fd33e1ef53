"""Added latency of the proxy (every rule on) on ``/v1/messages`` and ``/v1/responses``, next to
``/v1/chat/completions`` at the same sizes, and against LiteLLM's proxy when one is installed.

    .venv/bin/python -m bench.overhead_protocols [--litellm /path/to/litellm] [--scale 1.0]
    .venv/bin/python -m bench.overhead_protocols --in-process 200   # CPU time, no HTTP
    .venv/bin/python -m bench.overhead_protocols --rules            # ctxproxy with no rule

The same conversation (``bench.workloads.agent_conversation``: 20 and 400 chat messages of real
agent turns) goes out in each protocol (``bench.protocol_convert``), with Claude Code's 12 tools
(~31 KB, from ``../shared/agents/samples/claude-code.jsonl``) in each protocol's own form, and the
other top-level keys of the samples (Claude Code's ``metadata``, ``thinking``,
``context_management``, ``output_config``, ``max_tokens``; Codex's ``include``, ``reasoning``,
``store``, ``prompt_cache_key``, ``text`` …; system prompts as Codex sends them, ``developer``
items). Every model gets the same 128k window (``pipeline.context_windows``), so the rules do the
same work in each protocol. The upstream (``bench/upstream_server.py``) answers each protocol on
its own path; ctxproxy relays Messages natively to an ``anthropic``-kind upstream and Responses and
chat to an ``openai``-kind one, both on that server. LiteLLM's proxy gets ``/v1/messages`` for an
``anthropic/`` model on the same server (its Anthropic pass-through), and, with
``--litellm-protocols``, the others.

Beside ctxproxy runs its floor (``bench.bare_relay``: the same server stack, upstream client and
forwarding with no parsing beyond the model, no rules, no log row), reported as its own added
latency and as ctxproxy's less it.

Measured as ``bench.overhead`` measures chat (each target alone, the other proxies paused; added =
target − direct at the same percentile), with two differences: the requests of a cell are sent in
``--rounds`` rounds alternating protocols and targets, so a slow spell of a shared machine lands
on all of them alike; and each (protocol, workload, stream) cell has its own sessions. Each
client's first request after a target resumes is sent and not measured: the first request after
a paused process resumes can take 5–15 ms (its timers, and a writer's batch deferred past the
pause, fire at once), which no server left running sees; measured, those 5 of a 20-message
cell's 300 requests at concurrency 1 were its p99."""

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
from typing import Any

import httpx
import orjson

from bench.overhead import only_running, percentile, start
from bench.overhead_table import print_table
from bench.protocol_convert import anthropic_tools, to_anthropic, to_responses
from bench.protocol_convert_gemini import gemini_path, to_gemini
from bench.workloads import agent_conversation
from tests.support.live import free_port
from tests.support.traces import SHARED

SAMPLES = SHARED / "agents" / "samples"
MODELS = {"chat": "gpt-4o", "messages": "claude-opus-5-5", "responses": "gpt-5.5",
          "gemini": "gemini-2.5-flash"}  # fmt: skip
PATHS = {
    "chat": "/v1/chat/completions",
    "messages": "/v1/messages",
    "responses": "/v1/responses",
    "gemini": gemini_path(MODELS["gemini"], False),
}


def path_of(protocol: str, stream: bool) -> str:
    """A protocol's path (Gemini's names the model and, streaming, the method and ``alt=sse``)."""
    return gemini_path(MODELS["gemini"], stream) if protocol == "gemini" else PATHS[protocol]


WINDOW = 128_000


def _sample_body(name: str) -> dict[str, Any]:
    """The last model request of a sample file."""
    body: dict[str, Any] = {}
    for line in (SAMPLES / name).read_bytes().splitlines():
        record = orjson.loads(line)
        if record.get("method") == "POST" and isinstance(record.get("body"), dict):
            body = record["body"]
    return body


def sample_tools() -> list[dict[str, Any]]:
    """Claude Code's tools (Anthropic form), the ~31 KB list every body here carries."""
    return _sample_body("claude-code.jsonl")["tools"]


def chat_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for t in tools:
        fn = {"name": t["name"], "description": t.get("description", ""),
              "parameters": t["input_schema"]}  # fmt: skip
        out.append({"type": "function", "function": fn})
    return out


def bodies(n_messages: int, stream: bool) -> dict[str, dict[str, Any]]:
    """protocol -> request body, one conversation of ``n_messages`` chat messages."""
    messages = agent_conversation(n_messages)
    tools = chat_tools(sample_tools())
    chat = {"model": MODELS["chat"], "messages": messages, "tools": tools, "stream": stream}
    claude = _sample_body("claude-code.jsonl")
    anthropic = to_anthropic({**chat, "model": MODELS["messages"]}).body
    for key in ("metadata", "max_tokens", "thinking", "context_management", "output_config"):
        if key in claude:
            anthropic[key] = claude[key]
    assert anthropic["tools"] == anthropic_tools(tools)
    codex = _sample_body("codex.jsonl")
    responses = to_responses({**chat, "model": MODELS["responses"]}, system="developer").body
    for key in ("tool_choice", "parallel_tool_calls", "reasoning", "store", "include",
                "prompt_cache_key"):  # fmt: skip
        if key in codex:
            responses[key] = codex[key]
    gemini = to_gemini({**chat, "model": MODELS["gemini"]}).body  # the model is the path's
    return {"chat": chat, "messages": anthropic, "responses": responses, "gemini": gemini}


def ctxproxy_config(upstream_root: str, window: int, rules: list[str] | None = None) -> str:
    """ctxproxy's config: every upstream on the fake's root; ``rules``: the rules it runs, in
    the order given (None: the configured defaults, every rule on)."""
    chosen = "" if rules is None else "rules: []\n" if not rules else "rules:\n"
    chosen += "".join(f"  - name: {name}\n" for name in rules or [])
    return (
        "upstreams:\n"
        "  - name: anthropic-bench\n"
        '    match: ["claude-*"]\n'
        "    kind: anthropic\n"
        f"    base_url: {upstream_root}\n"
        "  - name: gemini-bench\n"
        '    match: ["gemini-*"]\n'
        "    kind: gemini\n"
        f"    base_url: {upstream_root}\n"
        "  - name: openai-bench\n"
        '    match: ["*"]\n'
        "    kind: openai\n"
        f"    base_url: {upstream_root}/v1\n"
        "pipeline:\n"
        f'  context_windows: {{"*": {window}}}\n'
        f"{chosen}"
    )


def litellm_config(upstream_root: str) -> str:
    return (
        "model_list:\n"
        f"  - model_name: {MODELS['messages']}\n"
        "    litellm_params:\n"
        f"      model: anthropic/{MODELS['messages']}\n"
        f"      api_base: {upstream_root}\n"
        "      api_key: sk-bench\n"
        f"  - model_name: {MODELS['gemini']}\n"
        "    litellm_params:\n"
        f"      model: gemini/{MODELS['gemini']}\n"
        f"      api_base: {upstream_root}\n"
        "      api_key: sk-bench\n"
        f"  - model_name: {MODELS['chat']}\n"
        "    litellm_params:\n"
        f"      model: openai/{MODELS['chat']}\n"
        f"      api_base: {upstream_root}/v1\n"
        "      api_key: sk-bench\n"
        f"  - model_name: {MODELS['responses']}\n"
        "    litellm_params:\n"
        f"      model: openai/{MODELS['responses']}\n"
        f"      api_base: {upstream_root}/v1\n"
        "      api_key: sk-bench\n"
        "litellm_settings:\n  drop_params: true\n"
    )


HEADERS = {
    "content-type": "application/json",
    "authorization": "Bearer sk-bench",
    "x-api-key": "sk-bench",
    "anthropic-version": "2023-06-01",
    "x-goog-api-key": "sk-bench",
}


async def run_load(
    client: httpx.AsyncClient,
    url: str,
    body: bytes,
    n: int,
    sessions: list[str],
    latencies: list[float],
    overheads: list[float] | None,
) -> None:
    """``n`` requests, ``len(sessions)`` at a time (one session per concurrent client)."""
    queue = list(range(n))

    async def worker(sid: str) -> None:
        headers = {**HEADERS, "x-session-id": sid}
        while queue:
            queue.pop()
            t0 = time.perf_counter()
            r = await client.post(url, content=body, headers=headers)
            await r.aread()
            latencies.append((time.perf_counter() - t0) * 1000)
            if r.status_code != 200:
                raise RuntimeError(f"{url}: {r.status_code} {r.text[:300]}")
            if overheads is not None and "x-ctxproxy-overhead-ms" in r.headers:
                overheads.append(float(r.headers["x-ctxproxy-overhead-ms"]))

    await asyncio.gather(*(worker(s) for s in sessions))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--litellm", help="path to a LiteLLM proxy executable (litellm[proxy])")
    parser.add_argument(
        "--litellm-protocols",
        nargs="+",
        choices=list(PATHS),
        help="the protocols sent to LiteLLM (default: messages, or with --protocols leaving it "
        "out, those protocols)",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="multiply request counts")
    parser.add_argument("--messages", type=int, nargs="+", default=[20, 400])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1])
    parser.add_argument("--stream", choices=["no", "yes", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=5, help="alternations per cell")
    parser.add_argument("--protocols", nargs="+", default=list(PATHS), choices=list(PATHS))
    parser.add_argument(
        "--window",
        type=int,
        default=WINDOW,
        help="every model's context window (128k: the 400-message body is compacted)",
    )
    parser.add_argument(
        "--rules",
        nargs="*",
        metavar="RULE",
        help="the rules ctxproxy's server runs, in order (no name: none; default: every rule on): "
        "what the rules cost against the proxy's own work (HTTP only: refused with --in-process)",
    )
    parser.add_argument(
        "--in-process",
        type=int,
        metavar="REPS",
        help="measure only the protocol-dependent work in this process, REPS requests each",
    )
    parser.add_argument(
        "--grow",
        action="store_true",
        help="with --in-process: each request of a session two messages longer than the last "
        "(an agent's turn: its call and the result), ending at --messages, instead of the same "
        "body again",
    )
    parser.add_argument(
        "--rules-cpu",
        action="store_true",
        help="with --in-process: the rules' timings in thread CPU time, not wall time (steadier "
        "on a shared machine)",
    )
    args = parser.parse_args()
    if args.litellm_protocols is None:
        args.litellm_protocols = ["messages"] if "messages" in args.protocols else args.protocols
    if args.in_process:
        if args.rules is not None:  # the in-process loop runs every rule: refused, not ignored
            parser.error("--rules is read by the HTTP runs only, not with --in-process")
        from bench.overhead_in_process import in_process

        in_process(args.messages, args.in_process, args.window, args.grow, args.rules_cpu)
        return

    tmp = Path(tempfile.mkdtemp(prefix="ctxproxy-bench-"))
    up_port, px_port = free_port(), free_port()
    root = f"http://127.0.0.1:{up_port}"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    procs = [
        start([sys.executable, "-m", "bench.upstream_server", str(up_port)], f"{root}/v1/models")
    ]
    cfg = tmp / "ctxproxy.yaml"
    cfg.write_text(ctxproxy_config(root, args.window, args.rules))
    ctxproxy = start(
        [sys.executable, "-m", "proxy.cli", "serve", "--config", str(cfg), "--port", str(px_port),
         "--db", str(tmp / "bench.db")],
        f"http://127.0.0.1:{px_port}/healthz",
        env,
    )  # fmt: skip
    procs.append(ctxproxy)
    # the floor: the same server, dispatch, upstream client and forwarding, nothing else
    fl_port = free_port()
    floor = start(
        [sys.executable, "-m", "bench.bare_relay", "--config", str(cfg), "--port", str(fl_port)],
        f"http://127.0.0.1:{fl_port}/healthz",
        env,
    )
    procs.append(floor)
    servers: dict[str, subprocess.Popen] = {"ctxproxy": ctxproxy, "floor": floor}
    bases = {
        "direct": root,
        "ctxproxy": f"http://127.0.0.1:{px_port}",
        "floor": f"http://127.0.0.1:{fl_port}",
    }
    if args.litellm:
        ll_port = free_port()
        ll_cfg = tmp / "litellm.yaml"
        ll_cfg.write_text(litellm_config(root))
        ll_env = {**env, "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true"}
        litellm = start(
            [args.litellm, "--config", str(ll_cfg), "--host", "127.0.0.1", "--port", str(ll_port),
             "--num_workers", "1"],
            f"http://127.0.0.1:{ll_port}/health/liveliness",
            ll_env,
        )  # fmt: skip
        procs.append(litellm)
        servers["litellm"] = litellm
        bases["litellm"] = f"http://127.0.0.1:{ll_port}"

    streams = {"no": [False], "yes": [True], "both": [False, True]}[args.stream]
    rows: list[dict[str, Any]] = []
    try:
        for n_msgs in args.messages:
            for stream in streams:
                encoded = {p: orjson.dumps(b) for p, b in bodies(n_msgs, stream).items()}
                for conc in args.concurrency:
                    rows.extend(measure_cell(args, servers, bases, encoded, n_msgs, stream, conc))
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGCONT)
                os.killpg(p.pid, signal.SIGTERM)
            p.wait(10)
    print_table(rows, "litellm" in bases)


def measure_cell(
    args: argparse.Namespace,
    servers: dict[str, subprocess.Popen],
    bases: dict[str, str],
    encoded: dict[str, bytes],
    n_msgs: int,
    stream: bool,
    conc: int,
) -> list[dict[str, Any]]:
    n = int((300 if n_msgs <= 100 else 100) * (4 if conc > 1 else 1) * args.scale)
    per_round = max(1, n // args.rounds)
    cell = f"{n_msgs}-{'s' if stream else 'j'}-{conc}"
    plan = [
        (protocol, target)
        for protocol in args.protocols
        for target in bases
        if target != "litellm" or protocol in args.litellm_protocols
    ]
    latencies: dict[tuple[str, str], list[float]] = {k: [] for k in plan}
    overheads: dict[str, list[float]] = {p: [] for p in args.protocols}

    async def run() -> None:
        limits = httpx.Limits(max_connections=conc * 4, max_keepalive_connections=conc * 4)
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:
            for r in range(args.rounds + 1):  # round 0 warms up (sessions, connections, caches)
                for protocol, target in plan:
                    url = bases[target] + path_of(protocol, stream)
                    sessions = [f"bench-{cell}-{protocol}-{k}" for k in range(conc)]
                    sink: list[float] = [] if r == 0 else latencies[protocol, target]
                    extra = overheads[protocol] if r and target == "ctxproxy" else None
                    with only_running(servers, target):
                        count = max(conc, per_round // 3) if r == 0 else per_round
                        if r:  # each client's first request after a resume is not measured
                            await run_load(client, url, encoded[protocol], conc, sessions, [], None)
                        await run_load(client, url, encoded[protocol], count, sessions, sink, extra)

    asyncio.run(run())
    rows = []
    for protocol in args.protocols:
        row: dict[str, Any] = {
            "protocol": protocol,
            "messages": n_msgs,
            "bytes": len(encoded[protocol]),
            "stream": stream,
            "concurrency": conc,
            "n": len(latencies[protocol, "direct"]),
        }
        for q in (0.5, 0.95, 0.99):
            base = percentile(latencies[protocol, "direct"], q)
            row[f"direct_p{int(q * 100)}"] = base
            for target in bases:
                if target != "direct" and (protocol, target) in latencies:
                    row[f"{target}_p{int(q * 100)}"] = (
                        percentile(latencies[protocol, target], q) - base
                    )
        row["in_proxy_p50"] = statistics.median(overheads[protocol])
        row["in_proxy_p99"] = percentile(overheads[protocol], 0.99)
        # the tail as a client sees it, each target's whole latency (not less direct's: its p99
        # is as noisy as the proxies')
        for target in bases:
            if (protocol, target) in latencies:
                whole = latencies[protocol, target]
                row[f"{target}_tail"] = percentile(whole, 0.99) / percentile(whole, 0.5)
        rows.append(row)
        print(orjson.dumps(row).decode(), flush=True)
    return rows


if __name__ == "__main__":
    main()
