"""track_entities → resolve_refs → inject over every request prefix of the trace corpus, with the
session state carried from request to request (10 s apart), as a live proxy would see them.
Prints per-rule time per request (median, p99, max) and what was tracked and resolved.

    .venv/bin/python bench/entities_corpus.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proxy.tokens import TokenCounters
from rules.base import Context, SessionState
from rules.context import inject
from rules.entities import resolve_refs, track_entities
from tests.support.traces import iter_conversations, request_prefixes


def main() -> None:
    tokens = TokenCounters().for_model("gpt-4o")
    steps = [
        ("track_entities", track_entities, track_entities.Config()),
        ("resolve_refs", resolve_refs, resolve_refs.Config()),
        ("inject", inject, inject.Config()),
    ]
    times: dict[str, list[float]] = {name: [] for name, _, _ in steps}
    requests = events = mentions = resolved = injected = 0
    for conv in iter_conversations():
        state, now = SessionState(), 1_000_000.0
        for prefix in request_prefixes(conv["messages"]):
            now += 10.0
            requests += 1
            ctx = Context(
                messages=prefix,
                original_messages=prefix,
                model="gpt-4o",
                tokens=tokens,
                now=now,
                session_id=conv["id"],
                state=state,
            )
            report: dict = {}
            for name, module, cfg in steps:
                started = time.perf_counter()
                res = module.apply(ctx.evolve(report=report), cfg)
                times[name].append((time.perf_counter() - started) * 1000)
                report.update(res.report)
                ctx = ctx.evolve(messages=res.messages, state=res.state)
            state = ctx.state
            events += len(report.get("entities", []))
            refs = report.get("references", [])
            mentions += len(refs)
            resolved += sum(1 for r in refs if r.get("entity"))
            injected += "inject" in report
    print(
        f"requests {requests}, events recorded {events}, mentions {mentions}, "
        f"resolved {resolved}, blocks injected {injected}"
    )
    for name, values in times.items():
        values.sort()
        p99 = values[int(len(values) * 0.99)]
        print(
            f"{name:15s} median {statistics.median(values):.3f} ms  p99 {p99:.3f} ms  "
            f"max {values[-1]:.1f} ms"
        )


if __name__ == "__main__":
    main()
