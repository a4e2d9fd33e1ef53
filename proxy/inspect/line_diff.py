"""One changed entry's lines as a unified diff (one line of context), within a bound on the
work: ``difflib`` matches lines in time that grows with the product of the two sides (a
2,000-line tool result whose every other line ``fix_encoding`` repaired took 0.3 s, and a body
of a hundred such results held the event loop for 31 s). The shared start and end are cut off
first; a middle past ``MAX_LINE_PAIRS`` pairs, or past what is left of the page's
``PAGE_LINE_PAIRS``, is compared line by line where both sides have as many lines (an edit in
place: repaired encoding, a redaction, a cut line), else shown removed then added."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator

from proxy.inspect.payload_align import shared_ends

MAX_LINE_PAIRS = 250_000  # one entry's middle matched by difflib at most this many line pairs
PAGE_LINE_PAIRS = 2_000_000  # all the entries of one page together
_HUNK = re.compile(r"@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@")


class Budget:
    """The line pairs a page may still spend on ``difflib``."""

    def __init__(self, pairs: int = PAGE_LINE_PAIRS) -> None:
        self.left = pairs


def diff_lines(a: list[str], b: list[str], budget: Budget, keep: int) -> tuple[list[str], int]:
    """(the first ``keep`` lines of ``a`` against ``b`` as a unified diff without its file
    headers, how many lines the whole diff has)."""
    start, end = shared_ends(a, b)
    mid_a, mid_b = len(a) - start - end, len(b) - start - end
    if mid_a == 0 and mid_b == 0:
        return [], 0
    pairs = mid_a * mid_b
    if pairs <= MAX_LINE_PAIRS and pairs <= budget.left:
        budget.left -= pairs
        lines = list(_matched(a, b, start, end))
    else:
        lines = list(_in_place(a, b, start, end))
    return lines[:keep], len(lines)


def _matched(a: list[str], b: list[str], start: int, end: int) -> Iterator[str]:
    """difflib's diff of the middle and a line of context either side, its hunks numbered as
    in the whole."""
    lo = max(start - 1, 0)
    hi_a, hi_b = min(len(a) - end + 1, len(a)), min(len(b) - end + 1, len(b))
    for line in difflib.unified_diff(a[lo:hi_a], b[lo:hi_b], lineterm="", n=1):
        if line.startswith(("---", "+++")):
            continue
        m = _HUNK.fullmatch(line)
        if m is not None and lo:
            line = f"@@ -{int(m[1]) + lo}{m[2]} +{int(m[3]) + lo}{m[4]} @@"
        yield line


def _in_place(a: list[str], b: list[str], start: int, end: int) -> Iterator[str]:
    mid_a, mid_b = a[start : len(a) - end], b[start : len(b) - end]
    yield f"@@ -{start + 1},{len(mid_a)} +{start + 1},{len(mid_b)} @@"
    if len(mid_a) == len(mid_b):
        for x, y in zip(mid_a, mid_b, strict=True):
            if x != y:
                yield "-" + x
                yield "+" + y
        return
    yield from ("-" + x for x in mid_a)
    yield from ("+" + y for y in mid_b)
