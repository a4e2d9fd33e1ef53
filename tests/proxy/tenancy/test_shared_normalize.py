"""``rules.matching.normalize`` kept its answers in one process-wide ``lru_cache`` of 4,096 entries
with no bound on a text's length, and break_loops hands it each call's whole arguments (the
loop key, ``rules.loops.detect.call_key``): one tenant's requests of large tool calls (a file
written whole) pinned the key and its normal form for every one of 4,096 calls, gigabytes held
for every tenant's process until other texts pushed them out, and a hit on another tenant's exact
arguments answered faster than a miss. Long texts are now normalised each time, never kept."""

from __future__ import annotations

import gc
import tracemalloc

from rules.base import Message
from rules.loops import break_loops
from tests.support.factories import apply_rules, assistant, call, ctx, result, system, user

KIB = 1024


def _request(i: int) -> list[Message]:
    content = f"# file {i}\n" + "x = 1\n" * (256 * KIB // 6)  # a 256 KiB file written whole
    written = call(f"w{i}", "write_file", path=f"src/f{i}.py", content=content)
    return [
        system("You are a coding agent."),
        user("write the files"),
        assistant("", written),
        result(f"w{i}", "error: disk full"),
    ]


def test_a_tenants_large_calls_are_not_kept_for_the_process() -> None:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(64):  # 64 requests of one large call each: 16 MiB of arguments
            apply_rules(ctx(_request(i)), (break_loops, break_loops.Config()))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # what the bounded memos may keep (observations' ``classify``: 8 million characters), and
    # a little more; kept for the process, the loop keys and their normal forms were 32 MiB more
    assert held < 10 * 1024 * KIB, f"{held / 1024 / KIB:.1f} MiB held after the requests"
