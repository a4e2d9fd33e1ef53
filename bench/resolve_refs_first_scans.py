"""resolve_refs on the first scans of requests of 400+ messages, each run alone out of the CPU's
caches: the requests that make the 400+ p99 of ``bench.resolve_refs_timing``, without the rest
of the replay's noise. The replay is run once (track_entities then resolve_refs, state and the
session memos carried, as there); every request of 400+ messages whose latest user message is
new since the session's last request is kept with its session memos as they were. Each is then
run alone, ``--repeat`` times: the rule's text memos emptied and a buffer of ``--buffer-mb`` MB
written before each call (its code and data out of the caches, as after the other rules of a
live request), timed by CPU time. Prints the median and the sum of each request's best, and
the median by what was found (nothing, mentions, a resolution), and a digest of the references
(the same for two trees that resolve the same).

    .venv/bin/python -m bench.resolve_refs_first_scans [--repeat 7] [--buffer-mb 3]

Run from outside the repository with another copy of ``rules/`` first on ``PYTHONPATH`` to time
that copy (see bench/resolve_refs_timing.py).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import statistics
import time
from typing import Any

import orjson

from bench.resolve_refs_timing import _latest_user, memo_module
from rules.base import Context, SessionState
from rules.entities import resolve_refs, track_entities
from rules.text_cache import text_cache
from tests.support.factories import FakeTokens
from tests.support.traces import iter_conversations, request_prefixes

LONG = 400  # messages, as in bench.resolve_refs_timing
MEMOISED = ("_mentions", "_scan", "_clipped")


def _empty_memos() -> None:
    memos = memo_module()
    for name in MEMOISED:
        cached: Any = getattr(memos, name, None)
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()
        elif cached is not None:  # an older text_cache, without cache_clear
            setattr(memos, name, text_cache(max_chars=4_000_000)(cached.__wrapped__))
    if hasattr(memos, "_last_prepared"):
        memos._last_prepared = None


def first_scans() -> list[tuple[Context, dict[str, Any], int]]:
    """(context, the session memos before it, characters of the question) of each first scan."""
    track_cfg, resolve_cfg, tokens = track_entities.Config(), resolve_refs.Config(), FakeTokens()
    _empty_memos()
    kept = []
    for conv in iter_conversations():
        state, now, memo, last_user = SessionState(), 1_000_000.0, {}, -1
        for prefix in request_prefixes(conv["messages"]):
            now += 10.0
            ctx = Context(
                messages=prefix, original_messages=prefix, model="gpt-4o", tokens=tokens,
                now=now, session_id=str(conv["id"]), state=state, memo=memo,
            )  # fmt: skip
            tracked = track_entities.apply(ctx, track_cfg)
            ctx = ctx.evolve(messages=tracked.messages, state=tracked.state, report=tracked.report)
            at, chars = _latest_user(prefix)
            if len(prefix) >= LONG and at != last_user:
                kept.append((ctx, {k: list(v) for k, v in memo.items()}, chars))
            last_user = at
            state = resolve_refs.apply(ctx, resolve_cfg).state
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--buffer-mb", type=int, default=3)
    args = parser.parse_args()
    cfg = resolve_refs.Config()
    scans = first_scans()
    buffer = bytearray(args.buffer_mb << 20)
    zeros = bytes(len(buffer[::64]))
    best = [float("inf")] * len(scans)
    refs: list[Any] = [None] * len(scans)
    for _ in range(args.repeat):
        for i, (ctx, memo, _chars) in enumerate(scans):
            _empty_memos()
            ctx.memo.clear()
            ctx.memo.update({k: list(v) for k, v in memo.items()})
            buffer[::64] = zeros  # a write every cache line
            gc.disable()
            started = time.process_time_ns()
            res = resolve_refs.apply(ctx, cfg)
            took = time.process_time_ns() - started
            gc.enable()
            best[i] = min(best[i], took / 1000)
            refs[i] = res.report.get("references", [])
    digest = hashlib.sha256(orjson.dumps(refs, option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]
    print(
        f"{len(scans)} first scans of requests of {LONG}+ messages, each one's best of "
        f"{args.repeat} (CPU µs, {args.buffer_mb} MB written before each): median "
        f"{statistics.median(best):.1f}, sum {sum(best) / 1000:.1f} ms; references {digest}"
    )
    groups = {
        "nothing found": [b for b, r in zip(best, refs, strict=True) if not r],
        "mentions, none resolved": [
            b for b, r in zip(best, refs, strict=True) if r and not any(x.get("entity") for x in r)
        ],
        "a resolution": [
            b for b, r in zip(best, refs, strict=True) if any(x.get("entity") for x in r)
        ],
    }
    for name, times in groups.items():
        if times:
            print(f"  {name}: {len(times)}, median {statistics.median(times):.1f} µs")


if __name__ == "__main__":
    main()
