"""Two lists of entries aligned as ``difflib.SequenceMatcher`` aligns them, within a bound on its
work: the payload diff of the /ui request page and ``ctxproxy show``."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

# Entries aligned by a matcher at most this many pairs (its time grows with their product; 20,000
# equal messages took 45 s on the event loop): past it, after the shared start and end, the
# client's entries are shown removed and the forwarded ones added
MAX_ALIGNED_PAIRS = 1_000_000

Opcode = tuple[str, int, int, int, int]


def shared_ends(a: Sequence[Any], b: Sequence[Any]) -> tuple[int, int]:
    """How many items ``a`` and ``b`` share at their start, then at their end (not overlapping)."""
    start = 0
    while start < len(a) and start < len(b) and a[start] == b[start]:
        start += 1
    end = 0
    while end < len(a) - start and end < len(b) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    return start, end


def aligned(a: list[Any], b: list[Any]) -> list[Opcode]:
    """``SequenceMatcher``'s opcodes for ``a`` against ``b``, within ``MAX_ALIGNED_PAIRS``: the
    shared start and end are found first (an agent's history changes in its middle), and a
    middle too large to align is one replaced run."""
    start, end = shared_ends(a, b)
    out: list[Opcode] = [("equal", 0, start, 0, start)] if start else []
    ma, mb = a[start : len(a) - end], b[start : len(b) - end]
    if ma or mb:
        if len(ma) * len(mb) <= MAX_ALIGNED_PAIRS:
            matcher = difflib.SequenceMatcher(None, ma, mb, autojunk=False)
            out += [(op, i1 + start, i2 + start, j1 + start, j2 + start)
                    for op, i1, i2, j1, j2 in matcher.get_opcodes()]  # fmt: skip
        else:
            out.append(("replace", start, len(a) - end, start, len(b) - end))
    if end:
        out.append(("equal", len(a) - end, len(a), len(b) - end, len(b)))
    return out
