"""The request page's diff is bounded: a body of a hundred 2,000-line tool results whose every
other line was repaired (``fix_encoding``) made difflib match lines for 31 s on the event loop.
Past the bound an entry is compared line by line, and what it shows is still each change."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.inspect import payload_diff
from proxy.inspect.line_diff import Budget, diff_lines
from tests.support.cpu_clock import cpu_timer


def _row(client: list[dict[str, Any]], forwarded: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "protocol": "chat",
        "request_body": orjson.dumps({"model": "m", "messages": client}),
        "forwarded_body": orjson.dumps({"model": "m", "messages": forwarded}),
    }


def _results(lines: int, fixed: bool) -> list[dict[str, Any]]:
    def text(n: int) -> str:
        return "\n".join(("é" if fixed else "Ã©") if i % 2 else f"{n}.{i}" for i in range(lines))

    return [{"role": "tool", "tool_call_id": f"c{n}", "content": text(n)} for n in range(100)]


def test_a_page_of_large_repaired_results_is_diffed_in_bounded_time() -> None:
    with cpu_timer() as took:
        out = payload_diff.diff(_row(_results(2000, False), _results(2000, True)))
    assert out is not None and len(out) == 100
    assert took.seconds < 3.0  # 31 s unbounded
    for entry in out:  # each still says what changed, in place
        assert entry["op"] == "changed"
        assert entry["lines"][:3] == ["@@ -3,1999 +3,1999 @@", "-Ã©", "+é"]
        assert entry["lines"][-1] == f"… {2 * 1000 + 1 - payload_diff.MAX_DIFF_LINES} more lines"


def test_a_small_change_reads_as_difflib_numbers_it() -> None:
    a = [f"l{i}" for i in range(50)]
    b = [*a[:20], "new", *a[21:]]
    lines, total = diff_lines(a, b, Budget(), 60)
    assert lines == ["@@ -20,3 +20,3 @@", " l19", "-l20", "+new", " l21"] and total == 5


def test_past_the_page_budget_an_entry_is_compared_line_by_line() -> None:
    a, b = ["x", "a", "y"], ["x", "b", "y"]
    assert diff_lines(a, b, Budget(0), 60)[0] == ["@@ -2,1 +2,1 @@", "-a", "+b"]
    lines, _ = diff_lines(["a"], ["b", "c"], Budget(0), 60)
    assert lines == ["@@ -1,1 +1,2 @@", "-a", "+b", "+c"]


def test_a_page_shows_a_bounded_number_of_hunks() -> None:
    """19,000 messages the proxy changed made a 40 MB page, 4 s of the event loop to render."""
    client = [{"role": "user", "content": f"q{n}\n" + "line\n" * 50} for n in range(19_000)]
    forwarded = [{**m, "content": m["content"] + "[repaired]"} for m in client]
    with cpu_timer() as took:
        out = payload_diff.diff(_row(client, forwarded))
    assert out is not None and len(out) == payload_diff.MAX_HUNKS + 1
    assert (
        out[-1]["title"] == f"… {19_000 - payload_diff.MAX_HUNKS} more changed entries, not shown"
    )
    assert sum(len(e.get("lines") or ()) for e in out) <= payload_diff.MAX_PAGE_LINES
    assert took.seconds < 3.0
