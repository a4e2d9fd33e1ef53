"""Corpus invariants across protocols: the trace corpus replayed through the real engine as Chat
Completions, and converted (``bench.protocol_convert``) as Anthropic Messages and as Responses
API requests, request by request with session state carried (as ``bench.golden`` replays it).
At every step the rules' decisions are compared with the chat replay's:

- ``repairs``: the repairs' kinds and counts (the adapters' own mends left out:
  ``ADAPTER_ONLY_REPAIRS``);
- ``entities``: the session's tracked entities (state namespace ``entities``) after the step;
- ``pruning``: prune's action per tool_call_id (and per action for turns without one);
- ``integrity``: the forwarded body passes its protocol's final check
  (``rules.chain.validator`` for chat, ``proxy.protocols.checks`` for the others), and the report
  has no ``integrity`` entry;
- ``forwarded`` (a stronger look, reported, not an invariant): the protocol's forwarded body equals
  the chat replay's forwarded body converted the same way.

A step whose decisions differ is put in a class (``classify``); the classes documented as expected
(``EXPECTED``) are not counted as failures.

    .venv/bin/python -m bench.protocol_invariants                 # whole corpus, both variants
    .venv/bin/python -m bench.protocol_invariants --limit 10 --variants defaults
    .venv/bin/python -m bench.protocol_invariants --ids mswea-pr816/... --verbose

Exit status 1 when a disagreement outside ``EXPECTED`` is found. The pieces: ``invariants_steps``
(what a step decided, the forwarded body's comparable view), ``invariants_classes`` (the classes
of a disagreement), ``invariants_replay`` (the engines and the replay); this module is the CLI."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections import Counter
from typing import Any

import orjson

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch on import

from bench.invariants_classes import EXPECTED, KNOWN_ISSUES
from bench.invariants_replay import run_variant
from bench.invariants_steps import ALL_DIMENSIONS, DIMENSIONS, TraceResult
from tests.support.traces import iter_conversations

__all__ = ["ALL_DIMENSIONS", "EXPECTED", "VARIANTS", "main", "run_variant"]

VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    # a tight budget: prune caps, supersedes, masks and drops turns on most conversations
    "budget-8k": {"pipeline": {"budget_tokens": 8000, "on_rule_error": "fail"}},
}


def unexpected(results: list[TraceResult]) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for r in results:
        for (protocol, cls), n in r.classes.items():
            if cls not in EXPECTED:
                out[protocol, cls] += n
    return out


def summarise(name: str, results: list[TraceResult], protocols: tuple[str, ...]) -> list[str]:
    steps = sum(r.steps for r in results)
    lines = [f"## {name}: {len(results)} conversations, {steps} steps"]
    for protocol in protocols:
        agree = {d: sum(r.agree[protocol, d] for r in results) for d in ALL_DIMENSIONS}
        all_agree = sum(
            1 for r in results if all(r.agree[protocol, d] == r.steps for d in DIMENSIONS)
        )
        cells = ", ".join(f"{d} {agree[d] / max(steps, 1):.2%}" for d in ALL_DIMENSIONS)
        lines.append(
            f"{protocol}: steps agreeing: {cells}; traces agreeing on every step "
            f"(repairs, entities, pruning, integrity): {all_agree}/{len(results)}"
        )
        classes: Counter[str] = Counter()
        traces: Counter[str] = Counter()
        for r in results:
            for (p, cls), n in r.classes.items():
                if p == protocol:
                    classes[cls] += n
                    traces[cls] += 1
        for cls, n in classes.most_common():
            tag = (
                "expected"
                if cls in EXPECTED
                else "KNOWN ISSUE"
                if cls in KNOWN_ISSUES
                else "UNEXPECTED"
            )
            lines.append(f"  {cls} ({tag}): {n} step-dimensions in {traces[cls]} traces")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="first N conversations only")
    parser.add_argument("--ids", nargs="*", help="these conversation ids only")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--protocols", nargs="+", default=["anthropic", "responses"])
    parser.add_argument("--system", choices=["instructions", "developer"], default="instructions")
    parser.add_argument(
        "--no-encrypted-reasoning",
        action="store_true",
        help="Responses reasoning items without encrypted_content",
    )
    parser.add_argument("--per-trace", action="store_true", help="a line per trace")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--json", help="write per-trace results here")
    args = parser.parse_args(argv)
    logging.getLogger("ctxproxy").setLevel(logging.CRITICAL)
    conversations = list(iter_conversations())
    if args.ids:
        conversations = [c for c in conversations if c["id"] in set(args.ids)]
    conversations = conversations[: args.limit]
    protocols = tuple(args.protocols)
    bad = 0
    dump: dict[str, Any] = {}
    for name in args.variants:
        started = time.perf_counter()
        results = asyncio.run(
            run_variant(
                VARIANTS[name],
                conversations,
                protocols,
                args.system,
                args.verbose,
                not args.no_encrypted_reasoning,
            )
        )
        for line in summarise(name, results, protocols):
            print(line)
        if args.per_trace:
            for r in results:
                cls = ", ".join(f"{p}:{c}×{n}" for (p, c), n in sorted(r.classes.items()))
                print(f"  {r.conv_id}: {r.steps} steps, {cls or 'all agree'}")
        for r in results:
            for key, text in r.examples.items():
                if not any(c in key for c in (*EXPECTED, *KNOWN_ISSUES)):
                    print(f"  example {r.conv_id}: {key}: {text}")
        print(f"  ({time.perf_counter() - started:.0f} s)")
        bad += sum(unexpected(results).values())
        dump[name] = {
            r.conv_id: {
                "steps": r.steps,
                "agree": {f"{p}/{d}": n for (p, d), n in r.agree.items()},
                "classes": {f"{p}/{c}": n for (p, c), n in r.classes.items()},
                "examples": r.examples,
            }
            for r in results
        }
    if args.json:
        with open(args.json, "wb") as f:
            f.write(orjson.dumps(dump, option=orjson.OPT_INDENT_2))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
