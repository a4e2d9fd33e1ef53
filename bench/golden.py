"""Golden replay: the whole trace corpus through the real engine, with digests of everything a
refactor must not change — the forwarded body, the report (without timings) and the session state
after each request — for several settings variants and both tokenizers.

    .venv/bin/python -m bench.golden            # compare with bench/golden.json (exit 1 on a diff)
    .venv/bin/python -m bench.golden --write    # record bench/golden.json anew
    .venv/bin/python -m bench.golden --limit 20 # the first 20 conversations only (a quick look)

Each conversation is one session, replayed prefix by prefix as an agent sends it (an in-memory
store, a simulated clock 7 s per request), so state is carried between requests as in the server.
A mismatch names the variant, the conversation and the step where the bytes first differ."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from proxy.rewrite.engine import Engine
from proxy.settings import Settings, settings_from_mapping
from proxy.store.sqlite import Store
from proxy.tokens import TokenCounters
from tests.support.traces import iter_conversations, request_prefixes

GOLDEN = Path(__file__).with_name("golden.json")
STEP_SECONDS = 7.0
# (name, model, settings overrides): defaults on both tokenizers, a tight budget that makes prune
# compact and drop, and history restore with a short entity TTL.
VARIANTS: list[tuple[str, str, dict[str, Any]]] = [
    ("defaults-gpt4o", "gpt-4o", {}),
    ("defaults-gpt4", "gpt-4", {}),
    ("budget-8k", "gpt-4o", {"pipeline": {"budget_tokens": 8000, "on_rule_error": "fail"}}),
    (
        "restore-ttl60",
        "gpt-4o",
        {
            "memory": {"restore_history": True},
            "rules": [
                {"name": "repair_tool_chain"},
                {"name": "fix_encoding"},
                {"name": "track_entities", "ttl_seconds": 60},
                {"name": "working_set"},
                {"name": "resolve_refs"},
                {"name": "prune"},
                {"name": "inject"},
                {"name": "measure"},
            ],
        },
    ),
]


def settings_for(overrides: dict[str, Any]) -> Settings:
    data: dict[str, Any] = {
        "upstreams": [{"name": "golden", "match": ["*"], "base_url": "http://127.0.0.1:9/v1"}],
        "pipeline": {"on_rule_error": "fail"},
    }
    data.update(overrides)
    return settings_from_mapping(data)


def _report_bytes(report: Mapping[str, Any]) -> bytes:
    stable = {k: v for k, v in report.items() if k != "timings_ms"}
    return orjson.dumps(stable, option=orjson.OPT_SORT_KEYS)


async def replay_variant(
    model: str, overrides: dict[str, Any], conversations: list[dict[str, Any]]
) -> dict[str, str]:
    """conversation id -> digest of every step's forwarded body, report and stored state."""
    store = Store(":memory:", batch_window_s=0)
    await store.open()
    engine = Engine(settings_for(overrides), store, TokenCounters(), strict=True)
    out: dict[str, str] = {}
    try:
        for conv in conversations:
            digest = hashlib.blake2b(digest_size=16)
            now = 1_000_000.0
            sid = f"golden-{conv['id']}"
            for prefix in request_prefixes(conv["messages"]):
                now += STEP_SECONDS
                body = {"model": model, "messages": prefix}
                done = await engine.rewrite(body, {}, now=now, session_id=sid)
                # stored under the principal's scope (``done.session_id``), not the bare name
                state, _ = await store.load_state(done.session_id)
                digest.update(orjson.dumps(done.body, option=orjson.OPT_SORT_KEYS))
                digest.update(_report_bytes(done.report))
                digest.update(orjson.dumps(state.to_json(), option=orjson.OPT_SORT_KEYS))
            out[conv["id"]] = digest.hexdigest()
    finally:
        engine.close()
        await store.close()
    return out


async def replay(limit: int | None) -> dict[str, dict[str, str]]:
    conversations = list(iter_conversations())[:limit]
    result = {}
    for name, model, overrides in VARIANTS:
        started = time.perf_counter()
        result[name] = await replay_variant(model, overrides, conversations)
        seconds = time.perf_counter() - started
        print(f"{name}: {len(conversations)} conversations in {seconds:.1f} s", file=sys.stderr)
    return result


def differences(expected: dict[str, dict[str, str]], got: dict[str, dict[str, str]]) -> list[str]:
    """One line per (variant, conversation) whose digest differs from the recorded one."""
    out = []
    for variant, convs in got.items():
        recorded = expected.get(variant, {})
        for conv_id, digest in convs.items():
            if recorded.get(conv_id) != digest:
                out.append(f"{variant}: {conv_id} differs")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="record bench/golden.json anew")
    parser.add_argument("--limit", type=int, default=None, help="first N conversations only")
    args = parser.parse_args(argv)
    logging.getLogger("ctxproxy").setLevel(logging.ERROR)  # the tight variant warns per request
    got = asyncio.run(replay(args.limit))
    if args.write:
        GOLDEN.write_bytes(orjson.dumps(got, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        print(f"wrote {GOLDEN}")
        return 0
    diffs = differences(orjson.loads(GOLDEN.read_bytes()), got)
    for line in diffs[:20]:
        print(line)
    steps = sum(len(v) for v in got.values())
    print(f"{steps} conversation replays, {len(diffs)} differ from {GOLDEN.name}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
