"""Which slots a template cannot match without, and whether a text holds any word of a slot:
a pattern needing a slot whose words are nowhere in the text is not run. Most questions hold no
type noun, verb or recency word of a language, so most patterns are skipped after one search per
slot (memoised per text) instead of each running over the whole text.

Sound by construction: a slot's group matches one of its words, so a text in which a search for
that alternation finds nothing cannot match a pattern that always passes through the group.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

# re's own parser (no public API; sre_parse warns as deprecated): templates read as re reads them
_parser: Any = importlib.import_module("re._parser")
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
MAX_CORES = 32  # a slot needing more substring tests than this is taken as present
PREFILTER_MIN_CHARS = 300  # a shorter text is scanned without tests (they would cost more)


def _always(items: Iterable[Any]) -> set[int]:
    """Group numbers every match of this sequence passes through."""
    out: set[int] = set()
    for op, av in items:
        name = str(op)
        if name == "SUBPATTERN":
            group, _add, _del, sub = av
            if group:
                out.add(group)
            out |= _always(sub)
        elif name == "ATOMIC_GROUP":
            out |= _always(av)
        elif name in _REPEATS:
            low, _high, sub = av
            if low >= 1:
                out |= _always(sub)
        elif name == "BRANCH":
            branches = [_always(b) for b in av[1]]
            out |= set.intersection(*branches) if branches else set()
    return out


def _literals(items: Iterable[Any]) -> set[str]:
    """Runs of literal characters every match of this sequence holds (two characters or more)."""
    out: set[str] = set()
    run: list[str] = []
    for op, av in [*items, (None, None)]:
        if str(op) == "LITERAL":
            run.append(chr(av))
            continue
        if len(run) >= 2:
            out.add("".join(run))
        run = []
        if str(op) in ("SUBPATTERN", "ATOMIC_GROUP"):
            out |= _literals(av[3] if str(op) == "SUBPATTERN" else av)
        elif str(op) in _REPEATS and av[0] >= 1:
            out |= _literals(av[2])
    return out


def required_literals(regex: re.Pattern[str]) -> tuple[str, ...]:
    """Literal strings every match of ``regex`` holds: ``'s`` in "the lead agent's config"."""
    return tuple(sorted(_literals(_parser.parse(regex.pattern, regex.flags))))


def required_slots(regex: re.Pattern[str], slots: Iterable[str]) -> tuple[str, ...]:
    """The slots (named groups ``slot`` or ``slot__2``) every match of ``regex`` fills."""
    known = set(slots)
    groups = _always(_parser.parse(regex.pattern, regex.flags))
    names = {num: name.split("__")[0] for name, num in regex.groupindex.items()}
    return tuple(sorted({names[g] for g in groups if names.get(g) in known}))


def cores(words: Iterable[str]) -> tuple[str, ...]:
    """The words a presence test needs: one containing another is dropped (the shorter is found
    wherever it is), so "create", "created", "creates" test as "create". A blank inside a word
    matches any run of blanks: a phrase is tested by its longest part."""
    firsts = sorted(
        {max(w.split(), key=len) for w in words if w.split()}, key=lambda w: (len(w), w)
    )
    kept: list[str] = []
    for word in firsts:
        if not any(k in word for k in kept):
            kept.append(word)
    return tuple(kept)


class SlotPresence:
    """Whether ``text`` holds any word of a slot: substring tests (``in`` runs in C, faster than
    a regex alternation started at every candidate character), once per slot and text."""

    __slots__ = ("_finders", "_seen", "_text")

    def __init__(self, text: str, finders: Mapping[str, tuple[str, ...]]) -> None:
        self._text = text
        self._finders = finders
        self._seen: dict[str, bool] = {}

    def has(self, slot: str) -> bool:
        seen = self._seen.get(slot)
        if seen is None:
            words = self._finders.get(slot)
            text = self._text
            seen = words is None or any(w in text for w in words)  # None: not tested
            self._seen[slot] = seen
        return seen

    def possible(self, requires: Iterable[str], literals: Iterable[str] = ()) -> bool:
        if self is EVERYTHING:
            return True
        text = self._text
        return all(s in text for s in literals) and all(self.has(slot) for slot in requires)


EVERYTHING = SlotPresence("", {})  # no test: every slot taken as present (see possible)
