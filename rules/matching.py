"""Tolerant text matching shared by the rules (tool-call ids, plan items, file names …).

Born of a real bug: a model looped forever citing "Phase 5:" (halfwidth colon) against
"Phase 5：" (fullwidth) in its todo list. So both sides are normalised before comparing, and a
near miss is resolved only when it is unambiguous — never by guessing.

API:

- ``normalize(s) -> str``: NFKC (fullwidth letters, digits and punctuation become halfwidth),
  then case folded, then every whitespace character removed.
- ``equivalent(a, b) -> bool``: ``normalize(a) == normalize(b)`` (and not both empty).
- ``match(needle, candidates, *, min_containment=6) -> MatchResult``:
    1. exact: candidates whose normalised form equals the needle's; one distinct value → match;
    2. unique containment: the shorter of the two normalised sides has at least
       ``min_containment`` characters and is contained in the other, for exactly one distinct
       candidate → match;
    3. otherwise no match. Two or more candidates at the deciding step → no match
       (``ambiguous=True``), never a guess.
  ``MatchResult.value`` is the matched candidate as given (or None), ``.how`` is ``"exact"``,
  ``"containment"`` or None, and ``.candidates`` lists, on a miss, the tied candidates when
  ambiguous, else every candidate, so the caller can report what would have matched.
- ``Matcher(candidates, budget=Budget(...))``: the same answers as ``match`` for one candidate
  set asked many times: normalised once, exact matches by index. Containment still compares the
  needle with every candidate, so a shared ``Budget`` caps those comparisons per request; once it
  is spent, only exact matches are found (a hostile history of thousands of unmatched ids then
  costs linear time, not seconds).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

How = Literal["exact", "containment"]


@dataclass(frozen=True)
class MatchResult:
    value: str | None
    how: How | None
    candidates: tuple[str, ...] = ()
    ambiguous: bool = False

    @property
    def matched(self) -> bool:
        return self.value is not None


# Texts up to this long are remembered (ids, names and plan items, compared many times); a longer
# one (a call's whole arguments, break_loops' loop key) is normalised each time: 4,096 of them
# kept for the process pinned one tenant's large calls, gigabytes, for every tenant.
MEMO_CHARS = 256


def normalize(s: str) -> str:
    """NFKC, case fold, drop whitespace. Remembered for short texts (``MEMO_CHARS``)."""
    return _normalize_memo(s) if len(s) <= MEMO_CHARS else _normalize(s)


def _normalize(s: str) -> str:
    folded = unicodedata.normalize("NFKC", s).casefold()
    # casefold can produce forms NFKC would change again (e.g. ß → ss is fine, but some
    # compatibility characters reappear); a second pass keeps normalize idempotent.
    folded = unicodedata.normalize("NFKC", folded)
    return "".join(folded.split())  # str.split: the characters str.isspace calls whitespace


_normalize_memo = lru_cache(maxsize=4096)(_normalize)


def equivalent(a: str, b: str) -> bool:
    na, nb = normalize(a), normalize(b)
    return bool(na) and na == nb


def _distinct(values: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for v in values:
        seen.setdefault(v, None)
    return list(seen)


def match(needle: str, candidates: Iterable[str], *, min_containment: int = 6) -> MatchResult:
    """The one candidate ``needle`` refers to, tolerating width, case and whitespace drift."""
    pool = _distinct(c for c in candidates if isinstance(c, str))
    n = normalize(needle)
    if not n:
        return MatchResult(None, None, tuple(pool))
    normed = [(c, normalize(c)) for c in pool]

    exact = [c for c, nc in normed if nc == n]
    if len(exact) == 1:
        return MatchResult(exact[0], "exact")
    if len(exact) > 1:
        return MatchResult(None, None, tuple(exact), ambiguous=True)

    contained = [
        c
        for c, nc in normed
        if nc and min(len(nc), len(n)) >= min_containment and (n in nc or nc in n)
    ]
    if len(contained) == 1:
        return MatchResult(contained[0], "containment")
    if len(contained) > 1:
        return MatchResult(None, None, tuple(contained), ambiguous=True)
    return MatchResult(None, None, tuple(pool))


class Budget:
    """Containment comparisons left for one request (shared by its matchers)."""

    def __init__(self, comparisons: int) -> None:
        self.left = comparisons

    def take(self, n: int) -> bool:
        if n > self.left:
            self.left = 0
            return False
        self.left -= n
        return True


class Matcher:
    """``match`` over a fixed candidate set, asked many times (see the module doc)."""

    def __init__(self, candidates: Iterable[str], budget: Budget | None = None) -> None:
        self.pool = _distinct(c for c in candidates if isinstance(c, str))
        self.normed = [(c, normalize_uncached(c)) for c in self.pool]
        self.exact: dict[str, list[str]] = {}
        for c, nc in self.normed:
            self.exact.setdefault(nc, []).append(c)
        self.budget = budget

    def match(self, needle: str, *, min_containment: int = 6) -> MatchResult:
        n = normalize(needle)
        if not n:
            return MatchResult(None, None, tuple(self.pool))
        exact = self.exact.get(n, [])
        if len(exact) == 1:
            return MatchResult(exact[0], "exact")
        if len(exact) > 1:
            return MatchResult(None, None, tuple(exact), ambiguous=True)
        if self.budget is not None and not self.budget.take(len(self.normed)):
            return MatchResult(None, None, tuple(self.pool))
        contained = [
            c
            for c, nc in self.normed
            if nc and min(len(nc), len(n)) >= min_containment and (n in nc or nc in n)
        ]
        if len(contained) == 1:
            return MatchResult(contained[0], "containment")
        if len(contained) > 1:
            return MatchResult(None, None, tuple(contained), ambiguous=True)
        return MatchResult(None, None, tuple(self.pool))


def normalize_uncached(s: str) -> str:
    """``normalize`` without filling its cache: a matcher normalises each candidate once."""
    return _normalize(s)
