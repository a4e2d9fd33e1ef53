"""A phrase many of a language's patterns begin with ("{det}\\s++<mod>{types}": "the config
file", "that table"), found once per long text: each pattern that begins with it is then tried
only where it starts, by ``match``, instead of scanning the text itself. On a long question the
phrase is rare (a determiner before a noun of the pack), so the patterns it gates mostly do not
run at all, and their compiled code is not read. This module reads templates; ``ref_lexicon``
compiles the gate, ``ref_scan`` finds where it matches and tries the patterns there.

Sound by construction: a pattern is gated only when its template's leading top-level items, made
no stricter, are the phrase's own. Made no stricter: a lookaround dropped (it only rejects), a
slot replaced by one holding all its words (``{type}`` by ``{types}``, ``{dem}`` by ``{det}``
when every demonstrative is a determiner). The phrase itself must be as wide already (no
lookaround, no slot with a wider one), and a template this module cannot read item by item (an
alternation at the top, an escape of another length than two) is not gated. Every match of the
pattern then starts where the phrase matches, so trying it at those places alone finds the same
matches in the same order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

# every form Python reads as one ({,n} and {,} too): an item read with too much is only
# compared whole, one read with too little could make an optional item look required
_QUANTIFIER = re.compile(r"(?:[*+?]|\{\d*(?:,\d*)?\})[+?]?")
_SLOT = re.compile(r"\{[a-z_]+\}")
_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")
_LONG_ESCAPES = frozenset("xuUN0123456789")  # \x41, \N{…}, \012, \1: not two characters


def items(source: str) -> list[str] | None:
    """The top-level items of a template (fragments expanded, slots not filled), each with its
    quantifier: ``\\b``, ``{det}``, ``\\s++``, ``(?:…)?``; None when it is not well formed."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        start = i
        ch = source[i]
        if ch == "\\":
            if source[i + 1 : i + 2] in _LONG_ESCAPES:
                return None  # its length is not read here: no leading items to share
            i += 2
        elif ch == "{" and (slot := _SLOT.match(source, i)) is not None:
            i = slot.end()
        elif ch == "[":
            i = _class_end(source, i)
        elif ch == "(":
            i = _group_end(source, i)
        elif ch in ")|":
            return None  # an alternation at the top level: no leading items to share
        else:
            i += 1
        if i < 0 or i > n:
            return None
        quantifier = _QUANTIFIER.match(source, i)
        if quantifier is not None:
            i = quantifier.end()
        out.append(source[start:i])
    return out


def _class_end(source: str, i: int) -> int:
    """The index just past the character class opening at ``i`` (-1: unclosed)."""
    j = i + 1
    if j < len(source) and source[j] == "^":
        j += 1
    if j < len(source) and source[j] == "]":
        j += 1  # a leading "]" is a member
    while j < len(source):
        if source[j] == "\\":
            j += 2
        elif source[j] == "]":
            return j + 1
        else:
            j += 1
    return -1


def _group_end(source: str, i: int) -> int:
    """The index just past the group opening at ``i`` (-1: unbalanced)."""
    depth, j = 0, i
    while j < len(source):
        ch = source[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "[":
            j = _class_end(source, j)
            if j < 0:
                return -1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return -1


def relaxed(source_items: Sequence[str], wider: Mapping[str, str]) -> list[str]:
    """The items made no stricter: lookarounds dropped, a slot replaced by the one ``wider``
    names (a slot holding all its words)."""
    out = []
    for item in source_items:
        if item.startswith(_LOOKAROUND) and item.endswith(")"):
            continue  # unquantified: zero-width, it only rejects
        if _SLOT.fullmatch(item):
            name = item[1:-1]
            item = "{" + wider.get(name, name) + "}"
        out.append(item)
    return out


def begins_with(pattern_items: Sequence[str], phrase_items: Sequence[str]) -> bool:
    return len(phrase_items) <= len(pattern_items) and list(
        pattern_items[: len(phrase_items)]
    ) == list(phrase_items)
