"""What break_loops finds in real agent histories, and whether its notes replay byte for byte.

Replays every request prefix an agent would have sent (``tests.support.traces.request_prefixes``)
of every conversation in the shared trace corpus through ``repair_tool_chain`` then
``break_loops``, carrying the rule's session state from request to request as the proxy does.
Prints, as Markdown: notes added and loop episodes (a loop's first note) per kind and per agent,
conversations marked ``lossy_tui_transcript`` apart (their transcripts cut call arguments short,
so different edits look the same), and the replay check: each request's forwarded messages must
start with the previous request's, byte for byte. ``--sample N`` prints N episodes (seeded
choice, every kind) with the calls before them, for reading by hand.

    .venv/bin/python -m bench.loops_corpus [--corpus PATH] [--sample N] [--seed S] [--json]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proxy.tokens import TokenCounters  # noqa: E402
from rules.base import Context, SessionState  # noqa: E402
from rules.chain import repair_tool_chain  # noqa: E402
from rules.loops import break_loops  # noqa: E402
from rules.messages import call_arguments_text, call_name, text_of, tool_pairs  # noqa: E402
from tests.support.traces import CORPUS, iter_conversations, request_prefixes  # noqa: E402


def _context_lines(messages: list[dict[str, Any]], index: int, calls: int = 8) -> list[str]:
    """The last ``calls`` calls up to the result at ``index``, one line each with its result."""
    rows = []
    for _, call, ri in tool_pairs(messages[: index + 1]):
        if ri is None:
            continue
        res = " ".join(text_of(messages[ri].get("content")).split())[:140]
        args = " ".join(call_arguments_text(call).split())[:140]
        rows.append(f"  [{ri}] {call_name(call)} {args}\n      -> {res}")
    return rows[-calls:]


def run(corpus: Path, sample: int, seed: int) -> dict[str, Any]:
    tokens = TokenCounters().for_model("gpt-4o")
    repair_cfg, cfg = repair_tool_chain.Config(), break_loops.Config()
    notes: Counter[str] = Counter()
    episodes: Counter[str] = Counter()
    lossy_notes: Counter[str] = Counter()
    by_agent: Counter[str] = Counter()
    replay_breaks = requests = conversations = with_loops = 0
    elided = receipts = near = 0
    times: list[float] = []
    found: list[dict[str, Any]] = []
    for conv in iter_conversations(corpus):
        conversations += 1
        lossy = bool(conv["meta"].get("lossy_tui_transcript"))
        agent = str(conv["meta"].get("agent") or "?")
        state = SessionState()
        previous: list[dict[str, Any]] = []
        any_loop = False
        for prefix in request_prefixes(conv["messages"]):
            requests += 1
            ctx = Context(messages=prefix, model="gpt-4o", tokens=tokens, now=0.0, state=state)
            repaired = repair_tool_chain.apply(ctx, repair_cfg)
            ctx = ctx.evolve(messages=repaired.messages)
            started = time.perf_counter()
            res = break_loops.apply(ctx, cfg)
            times.append((time.perf_counter() - started) * 1000)
            state = res.state
            if res.messages[: len(previous)] != previous:
                replay_breaks += 1
            previous = res.messages
            for item in res.report.get("loops") or []:
                any_loop = True
                kind = item["kind"]
                (lossy_notes if lossy else notes)[kind] += 1
                first = item["count"] == (
                    cfg.min_cycles if kind == "oscillation" else cfg.min_count
                )
                if not lossy:
                    by_agent[agent] += 1
                    elided += bool(item.get("elided"))
                    receipts += bool(item["candidates"])
                    near += "near_miss" in item
                    episodes[kind] += first
                if first:
                    found.append(
                        {
                            "conversation": conversations - 1,
                            "agent": agent + (" (lossy transcript)" if lossy else ""),
                            "kind": kind,
                            "index": item.get("index"),
                            "note": item["note"],
                            "before": _context_lines(ctx.messages, int(item.get("index", 0))),
                        }
                    )
        with_loops += any_loop
    rng = random.Random(seed)
    picked = rng.sample(found, min(sample, len(found))) if sample else []
    return {
        "conversations": conversations,
        "requests": requests,
        "conversations_with_loops": with_loops,
        "notes_by_kind": dict(notes.most_common()),
        "episodes_by_kind": dict(episodes.most_common()),
        "notes_by_agent": dict(by_agent.most_common()),
        "lossy_notes_by_kind": dict(lossy_notes.most_common()),
        "elided": elided,
        "with_receipts": receipts,
        "near_misses": near,
        "replay_breaks": replay_breaks,
        "time_ms": {
            "median": round(statistics.median(times), 3),
            "p99": round(sorted(times)[int(0.99 * (len(times) - 1))], 3),
            "max": round(max(times), 3),
        },
        "sample": sorted(picked, key=lambda e: (e["conversation"], e["index"])),
    }


def markdown(r: dict[str, Any]) -> str:
    lines = [
        f"{r['requests']} requests of {r['conversations']} conversations; "
        f"{r['conversations_with_loops']} conversations with a loop note; "
        f"replay breaks (a forwarded prefix changed): {r['replay_breaks']}.",
        "",
        "| kind | notes | episodes |",
        "|---|---|---|",
        *[
            f"| {k} | {n} | {r['episodes_by_kind'].get(k, 0)} |"
            for k, n in r["notes_by_kind"].items()
        ],
        "",
        f"Notes by agent: {r['notes_by_agent']}; elided {r['elided']}, with receipts "
        f"{r['with_receipts']}, near misses {r['near_misses']}.",
        f"Lossy TUI transcripts apart: {r['lossy_notes_by_kind'] or '{}'}.",
        f"Time per request: median {r['time_ms']['median']} ms, p99 {r['time_ms']['p99']} ms, "
        f"max {r['time_ms']['max']} ms.",
    ]
    for e in r["sample"]:
        lines += [
            "",
            f"--- conversation {e['conversation']} ({e['agent']}), {e['kind']} at message "
            f"{e['index']}",
            *e["before"],
            e["note"],
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--sample", type=int, default=0, help="episodes to print for reading")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.corpus, args.sample, args.seed)
    print(
        orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() if args.json else markdown(result)
    )


if __name__ == "__main__":
    main()
