"""Time per request of resolve_refs over every request prefix of the trace corpus, as a live proxy
would run it: track_entities then resolve_refs, session state carried from request to request
(10 s apart). Prints the median, p99 and max, and what was detected and resolved.

    .venv/bin/python -m bench.resolve_refs_timing [--repeat 3]

``--repeat N`` replays the corpus N times (fresh caches each time) and reports the best p99 of
the N, so a busy machine's noise does not count. Run from outside the repository with another
copy of ``rules/`` first on ``PYTHONPATH`` to time that copy (see bench/references_eval.py).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from pathlib import Path

import rules
from rules.base import Context, SessionState
from rules.entities import resolve_refs, track_entities
from rules.text_cache import text_cache
from tests.support.factories import FakeTokens
from tests.support.traces import iter_conversations, request_prefixes


def replay() -> tuple[list[float], int, int, int]:
    """Milliseconds per request, requests, mentions, resolved."""
    track_cfg, resolve_cfg = track_entities.Config(), resolve_refs.Config()
    # a fresh memo of detected mentions: every message is seen for the first time, as live
    resolve_refs._mentions = text_cache(max_chars=4_000_000)(resolve_refs._mentions.__wrapped__)
    resolve_refs._scan = text_cache(max_chars=4_000_000)(resolve_refs._scan.__wrapped__)
    times: list[float] = []
    mentions = resolved = 0
    tokens = FakeTokens()
    for conv in iter_conversations():
        state, now = SessionState(), 1_000_000.0
        for prefix in request_prefixes(conv["messages"]):
            now += 10.0
            ctx = Context(
                messages=prefix,
                original_messages=prefix,
                model="gpt-4o",
                tokens=tokens,
                now=now,
                session_id=str(conv["id"]),
                state=state,
            )
            tracked = track_entities.apply(ctx, track_cfg)
            ctx = ctx.evolve(messages=tracked.messages, state=tracked.state, report=tracked.report)
            started = time.perf_counter()
            res = resolve_refs.apply(ctx, resolve_cfg)
            times.append((time.perf_counter() - started) * 1000)
            state = res.state  # track_entities' and resolve_refs' own (the question's time)
            refs = res.report.get("references", [])
            mentions += len(refs)
            resolved += sum(1 for r in refs if r.get("entity"))
    return times, len(times), mentions, resolved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    print(f"rules from {Path(rules.__file__).parent}")
    best = None
    for _ in range(args.repeat):
        gc.collect()
        times, requests, mentions, resolved = replay()
        times.sort()
        p99 = times[int(len(times) * 0.99)]
        line = (
            f"requests {requests}, mentions {mentions}, resolved {resolved}; resolve_refs "
            f"median {statistics.median(times):.3f} ms  p99 {p99:.3f} ms  max {times[-1]:.1f} ms"
        )
        print(line)
        best = p99 if best is None else min(best, p99)
    print(f"best p99 {best:.3f} ms")


if __name__ == "__main__":
    main()
