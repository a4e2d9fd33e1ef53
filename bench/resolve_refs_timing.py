"""Time per request of resolve_refs over every request prefix of the trace corpus, as a live proxy
would run it: track_entities then resolve_refs, session state and the session's memos
(``Context.memo``, which the proxy keeps across a session's requests) carried from request to
request (10 s apart). Prints the median, p99 and max, and what was detected and resolved.

    .venv/bin/python -m bench.resolve_refs_timing [--repeat 3] [--cpu]

The garbage collector is off while resolve_refs runs (as ``timeit`` does): the collections the
replay's other allocations trigger would otherwise land on whichever request comes next.
``--repeat N`` replays the corpus N times (fresh caches each time) and reports the best p99 of
the N, so a busy machine's noise does not count; ``--cpu`` times by CPU time and reports each
request's best of the N too (the replay is deterministic: the same requests in the same order).
Run from outside the repository with another copy of ``rules/`` first on ``PYTHONPATH`` to time
that copy (see bench/references_eval.py).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import rules
from rules.base import Context, Message, SessionState
from rules.entities import resolve_refs, track_entities
from rules.messages import text_of
from rules.text_cache import text_cache
from tests.support.factories import FakeTokens
from tests.support.traces import iter_conversations, request_prefixes

LONG = 400  # messages: the long sessions, where the per-request walk shows
MEMOISED = ("_mentions", "_scan", "_clipped")  # resolve_refs' text memos, emptied each replay


def memo_module() -> Any:
    """The module holding resolve_refs' text memos and the text last prepared: ``ref_read``, or
    resolve_refs itself in a copy of ``rules/`` from before it."""
    try:
        return importlib.import_module("rules.entities.ref_read")
    except ImportError:
        return resolve_refs


def _latest_user(messages: Sequence[Message]) -> tuple[int, int]:
    """(index, characters) of the last user-role message, (-1, 0) without one."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i, len(text_of(messages[i].get("content")))
    return -1, 0


def replay(
    clock: Callable[[], float] = time.perf_counter,
    shapes: list[tuple[str, int, int, bool, int]] | None = None,
) -> tuple[list[float], list[float], int, int, int]:
    """Milliseconds per request (by ``clock``), those of requests of LONG messages or more,
    requests, mentions, resolved. ``shapes`` gets, for each request of LONG messages or more,
    (session, messages, characters of the latest user message, whether that message is new
    since the session's last request, references resolved): read outside the timed call."""
    track_cfg, resolve_cfg = track_entities.Config(), resolve_refs.Config()
    # a fresh memo of detected mentions: every message is seen for the first time, as live
    memos = memo_module()
    for name in MEMOISED:
        cached: Any = getattr(memos, name, None)  # another copy of rules/ may memoise less
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()  # emptied, with its own bounds
        elif cached is not None:  # an older text_cache, without cache_clear
            fresh = text_cache(max_chars=4_000_000)(cached.__wrapped__)
            setattr(memos, name, fresh)
    if hasattr(memos, "_last_prepared"):
        memos._last_prepared = None  # the text last prepared, one slot
    times: list[float] = []
    long_times: list[float] = []
    mentions = resolved = 0
    tokens = FakeTokens()
    for conv in iter_conversations():
        state, now = SessionState(), 1_000_000.0
        memo: dict[str, list[tuple[Sequence[Message], Any]]] = {}  # the session memos' share
        last_user = -1
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
                memo=memo,
            )
            tracked = track_entities.apply(ctx, track_cfg)
            ctx = ctx.evolve(messages=tracked.messages, state=tracked.state, report=tracked.report)
            # the collector off while timed, as timeit does: a collection falls where the whole
            # replay's allocations (other rules', the corpus') put it, not where this rule's do
            gc.disable()
            started = clock()
            res = resolve_refs.apply(ctx, resolve_cfg)
            took = (clock() - started) * 1000
            gc.enable()
            times.append(took)
            if len(prefix) >= LONG:
                long_times.append(took)
            state = res.state  # track_entities' and resolve_refs' own (the question's time)
            refs = res.report.get("references", [])
            mentions += len(refs)
            found = sum(1 for r in refs if r.get("entity"))
            resolved += found
            if shapes is not None:
                at, chars = _latest_user(prefix)
                if len(prefix) >= LONG:
                    shapes.append((str(conv["id"]), len(prefix), chars, at != last_user, found))
                last_user = at
    return times, long_times, len(times), mentions, resolved


def _stats(times: list[float]) -> tuple[float, float, float]:
    """(median, p99, max) of ``times``."""
    ordered = sorted(times)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.99)], ordered[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="time by CPU time (time.process_time) and also report each request's best of the "
        "repeats: less of a shared machine's noise",
    )
    parser.add_argument(
        "--slowest",
        action="store_true",
        help=f"with --cpu: list the slowest 1%% of requests of {LONG}+ messages (each one's "
        "best of the repeats): the latest user message's length, whether it is new (its first "
        "scan), references resolved",
    )
    args = parser.parse_args()
    print(f"rules from {Path(rules.__file__).parent}")
    clock = time.process_time if args.cpu else time.perf_counter
    best = None
    fastest: list[float] = []
    fastest_long: list[float] = []
    for _ in range(args.repeat):
        gc.collect()
        shapes: list[tuple[str, int, int, bool, int]] = []
        times, long_times, requests, mentions, resolved = replay(clock, shapes)
        median, p99, top = _stats(times)
        print(
            f"requests {requests}, mentions {mentions}, resolved {resolved}; resolve_refs "
            f"median {median:.4f} ms  p99 {p99:.3f} ms  max {top:.1f} ms"
        )
        if long_times:
            long_median, long_p99, _ = _stats(long_times)
            print(
                f"  {len(long_times)} requests of {LONG}+ messages: median "
                f"{long_median:.4f} ms  p99 {long_p99:.3f} ms"
            )
        best = p99 if best is None else min(best, p99)
        fastest = list(map(min, fastest, times)) if fastest else times
        fastest_long = list(map(min, fastest_long, long_times)) if fastest_long else long_times
    print(f"best p99 {best:.3f} ms")
    if args.cpu and args.repeat > 1:  # the same requests in the same order each time
        median, p99, _ = _stats(fastest)
        long_median, long_p99, _ = _stats(fastest_long or [0.0])
        print(
            f"each request's best of {args.repeat}: median {median:.4f} ms  p99 {p99:.3f} ms; "
            f"{LONG}+ messages: median {long_median:.4f} ms  p99 {long_p99:.3f} ms"
        )
        if args.slowest:
            _print_slowest(fastest_long, shapes)


def _print_slowest(long_times: list[float], shapes: list[tuple[str, int, int, bool, int]]) -> None:
    """The slowest 1% of the long requests, with their shapes (the same order: a deterministic
    replay)."""
    ranked = sorted(zip(long_times, shapes, strict=True), key=lambda x: -x[0])
    top = ranked[: len(ranked) - int(len(ranked) * 0.99)]
    for took, (session, messages, chars, new, found) in top:
        sighting = "first scan" if new else "seen before"
        print(f"  {took:.3f} ms  {session} ({messages} messages): question of {chars} "
              f"characters, {sighting}, {found} resolved")  # fmt: skip
    first = sum(1 for _, shape in top if shape[3])
    print(f"  of these {len(top)}: {first} first scans; requests of {LONG}+ messages resolving "
          f"any: {sum(1 for s in shapes if s[4])}")  # fmt: skip


if __name__ == "__main__":
    main()
