"""track_entities on a tool loop's growing requests when its state already holds many keys of
calls read (a long session: the keys outlive the agent's own truncation of its history, up to
``max_seen_calls``, 5,000 by default): the rule's thread CPU per request, median.

    .venv/bin/python -m bench.entities_seen [--keys 4990] [--messages 140]

The agent conversation of ``bench.overhead_protocols`` (chat), two messages longer each request,
the very same message objects, with the session's ``Context.memo`` kept across its requests as
the runner keeps it; the first five requests are left out."""

from __future__ import annotations

import argparse
import statistics
import time

from bench.overhead_protocols import bodies
from rules.base import ListMemo, SessionState
from rules.entities import track_entities
from tests.support.factories import ctx


def run(keys: int, size: int) -> tuple[float, int, int]:
    """(the rule's median µs, requests timed, keys held at the end)."""
    cfg = track_entities.Config()
    full = bodies(size, False)["chat"]["messages"]
    seen = [f"earlier_{i:06d}:{i:012x}" for i in range(keys)]
    state = SessionState({track_entities.META: {"cwd": None, "seq": 0, "seen": seen}})
    memo: ListMemo = {}
    cpu: list[float] = []
    for n in range(min(20, len(full)), len(full) + 1, 2):
        request = ctx(list(full[:n]), now=float(n), state=state).evolve(memo=memo)
        started = time.thread_time()
        state = track_entities.apply(request, cfg).state
        cpu.append((time.thread_time() - started) * 1e6)
    held = len(state.get(track_entities.META)["seen"])
    return statistics.median(cpu[5:]), len(cpu) - 5, held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=4990, help="keys held before the session")
    parser.add_argument("--messages", type=int, default=140, help="the last request's messages")
    args = parser.parse_args()
    median, requests, held = run(args.keys, args.messages)
    print(f"track_entities: median {median:.0f} µs a request over {requests}, {held} keys held")


if __name__ == "__main__":
    main()
