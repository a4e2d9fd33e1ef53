"""The literal strings a template cannot match without ("'s" in "the lead agent's config",
"what" in "what you just deleted"): a pattern is not run over a question that lacks one.
One ``in`` test per literal costs far less than a pattern's scan of the text.

Sound by construction: the strings are read from the compiled template's own parse tree, on the
path every match takes (not inside an optional group, and in every branch of an alternation).
Slots (word lists) are not tested: in long texts their words, as substrings, are nearly always
present, and testing a few dozen of them costs more than the scan it would save.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rules.regex_literals import parse_tree, required_literals

__all__ = ["PREFILTER_MIN_CHARS", "possible", "required_literals", "tail_words"]

_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
# A shorter text is scanned without the phrase gates (``ref_gate``: finding the phrase first
# costs more there); literals are tested at every length (a few ``in`` tests cost less than
# a pattern's scan, which in a replay runs with its code and tables out of the CPU's caches).
PREFILTER_MIN_CHARS = 300


def possible(text: str, literals: Iterable[str]) -> bool:
    """Whether ``text`` holds every literal (a pattern needing them may match)."""
    return all(s in text for s in literals)


def tail_words(regex: re.Pattern[str]) -> tuple[str, ...]:
    """Strings one of which every match of ``regex`` ends with, before the blanks it ends with
    at the end of the text (``… on\\s++$`` -> ``on``); () when its end is not of that shape. The
    relation words read before a mention ("the commit on ") are tested by one ``endswith``."""
    if regex.flags & re.IGNORECASE:
        return ()  # the text it is tested on is folded, the words would not be
    items = list(parse_tree(regex.pattern, regex.flags))
    if not items or str(items[-1][0]) != "AT" or str(items[-1][1]) != "AT_END":
        return ()
    items = items[:-1]
    while items and _blanks(items[-1]):
        items = items[:-1]
    words = {w.rstrip() for w in _tails(items) or ()}  # the text is tested right-stripped
    return () if "" in words else tuple(sorted(words))


def _blanks(item: Any) -> bool:
    """A run of one or more blanks (``\\s++``)."""
    op, av = item
    if str(op) not in _REPEATS or av[0] < 1:
        return False
    body = list(av[2])
    return (
        len(body) == 1
        and str(body[0][0]) == "IN"
        and [(str(o), str(a)) for o, a in body[0][1]] == [("CATEGORY", "CATEGORY_SPACE")]
    )


def _tails(items: list[Any]) -> set[str] | None:
    """The literal ends of a sequence: its trailing literal characters, or those of each branch
    of a trailing alternation (a suffix of what every match ends with); None: not literal."""
    run: list[str] = []
    for op, av in reversed(items):
        if str(op) == "LITERAL":
            run.append(chr(av))
            continue
        if run:
            break
        if str(op) == "SUBPATTERN":
            if av[1] & re.IGNORECASE:
                return None  # (?i:…): the case of the text is not the words'
            return _tails(list(av[3]))
        if str(op) == "BRANCH":
            ends = [_tails(list(b)) for b in av[1]]
            if any(e is None for e in ends):
                return None
            return {t for e in ends if e is not None for t in e}
        return None
    return {"".join(reversed(run))} if run else None
