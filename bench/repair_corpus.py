"""How often real agent histories need repair_tool_chain, and what the rule costs per request.

Replays every request prefix an agent would have sent (``tests.support.traces.request_prefixes``)
of every conversation in the shared trace corpus through ``repair_tool_chain.apply`` and
``fix_encoding.apply``, and prints, as Markdown: how many requests needed each repair kind, and
each rule's time per request (median, p99). Conversations marked ``lossy_tui_transcript`` are
left out of the repair counts (their gaps are the terminal's, not the agent's) and counted apart.

    .venv/bin/python bench/repair_corpus.py [--corpus PATH] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proxy.tokens import TokenCounters  # noqa: E402
from rules.base import Context  # noqa: E402
from rules.chain import repair_tool_chain  # noqa: E402
from rules.chain.validator import find_violations  # noqa: E402
from rules.encoding import fix_encoding  # noqa: E402
from tests.support.traces import CORPUS, iter_conversations, request_prefixes  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(corpus: Path) -> dict:
    tokens = TokenCounters().for_model("gpt-4o")
    repair_cfg, enc_cfg = repair_tool_chain.Config(), fix_encoding.Config()
    kinds: Counter[str] = Counter()
    lossy_kinds: Counter[str] = Counter()
    times: dict[str, list[float]] = {"repair_tool_chain": [], "fix_encoding": []}
    requests = lossy_requests = needing = violations_after = 0
    conversations = 0
    full_kinds: Counter[str] = Counter()  # whole conversations, final message included
    for conv in iter_conversations(corpus):
        conversations += 1
        lossy = bool(conv["meta"].get("lossy_tui_transcript"))
        if not lossy:
            _, whole = repair_tool_chain.repair_messages(conv["messages"])
            full_kinds.update({r["kind"] for r in whole})
        for prefix in request_prefixes(conv["messages"]):
            ctx = Context(
                messages=prefix, model="gpt-4o", tokens=tokens, now=0.0, original_messages=prefix
            )
            started = time.perf_counter()
            res = repair_tool_chain.apply(ctx, repair_cfg)
            times["repair_tool_chain"].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            fix_encoding.apply(ctx.evolve(messages=res.messages), enc_cfg)
            times["fix_encoding"].append((time.perf_counter() - started) * 1000)
            violations_after += len(find_violations(res.messages))
            found = {r["kind"] for r in res.report["repairs"]}
            if lossy:
                lossy_requests += 1
                lossy_kinds.update(found)
                continue
            requests += 1
            needing += bool(found)
            kinds.update(found)
    return {
        "conversations": conversations,
        "requests": requests,
        "requests_needing_repair": needing,
        "requests_by_kind": dict(kinds.most_common()),
        "lossy_requests": lossy_requests,
        "lossy_requests_by_kind": dict(lossy_kinds.most_common()),
        "violations_after_repair": violations_after,
        "full_conversations_by_kind": dict(full_kinds.most_common()),
        "time_ms": {
            rule: {
                "median": round(statistics.median(v), 3),
                "p99": round(pct(v, 0.99), 3),
                "max": round(max(v), 3),
            }
            for rule, v in times.items()
        },
    }


def markdown(r: dict) -> str:
    lines = [
        f"{r['requests']} requests (every request prefix of {r['conversations']} conversations, "
        f"lossy TUI transcripts apart); {r['requests_needing_repair']} needed a repair; "
        f"violations left after repair: {r['violations_after_repair']}.",
        "",
        "| repair kind | requests |",
        "|---|---|",
        *[f"| {k} | {n} |" for k, n in r["requests_by_kind"].items()],
        "",
        "Whole conversations (final message included, lossy apart), by kind: "
        f"{r['full_conversations_by_kind']}.",
        "",
        f"Lossy TUI transcripts: {r['lossy_requests']} requests, "
        f"by kind {r['lossy_requests_by_kind'] or '{}'}.",
        "",
        "| rule | median ms / request | p99 ms / request | max ms |",
        "|---|---|---|---|",
        *[f"| {k} | {v['median']} | {v['p99']} | {v['max']} |" for k, v in r["time_ms"].items()],
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.corpus)
    print(
        orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() if args.json else markdown(result)
    )


if __name__ == "__main__":
    main()
