"""The text side of detecting references: a user's text made ready for the ``references``
pack's patterns (injected blocks dropped, folded to lower case keeping positions, the ``not_refs``
spans and quoted text claimed: ``ref_quoted``) and the patterns a scan runs. Used by
``ref_detect``; pure, but for a small memo of the patterns each lexicon runs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rules.entities import ref_grammar
from rules.entities.ref_lexicon import Kind, Lexicon, Pattern
from rules.entities.ref_prefilter import possible, required_literals
from rules.entities.ref_quoted import quoted_spans
from rules.messages import INJECT_CLOSE, INJECT_OPEN

FILE_KINDS = ("file", "folder")  # always in reach: files are not in a session's summary

# Linear: every opening marker's match runs to its closing one or to the end, so none rescans.
_INJECTED = re.compile(re.escape(INJECT_OPEN) + r".*?(?:" + re.escape(INJECT_CLOSE) + r"|\Z)", re.S)


def strip_injected(text: str) -> str:
    """The text without blocks the proxy injected (a client that echoes them back)."""
    return _INJECTED.sub(" ", text) if INJECT_OPEN in text else text


def fold(text: str) -> str:
    """``text`` lower-cased, keeping every character's position (a character whose lower case
    is longer, such as "İ", stays as it is)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def matches(p: Pattern, text: str) -> Any:
    """``p.regex.finditer(text)``, less matches that start inside a word when ``word_start``."""
    pos = 0
    while pos <= len(text):
        m = p.regex.search(text, pos)
        if m is None:
            return
        start, end = m.span()
        if p.word_start and start > 0 and is_word(text[start - 1]):
            pos = start + 1
            continue
        yield m
        pos = end if end > start else end + 1


def starts(gate: re.Pattern[str], text: str) -> list[int]:
    """Every position where ``gate`` matches, overlapping matches included: one search each."""
    out = []
    m = gate.search(text)
    while m is not None:
        at = m.start()
        out.append(at)
        m = gate.search(text, at + 1)
    return out


def matches_at(p: Pattern, text: str, where: Sequence[int]) -> Any:
    """``matches(p, text)`` for a pattern every match of which starts at one of ``where``
    (ascending; ``ref_gate``): ``match`` tried there only, past the last match's end."""
    pos = 0
    for at in where:
        if at < pos:
            continue
        m = p.regex.match(text, at)
        if m is None:
            continue
        start, end = m.span()
        if p.word_start and start > 0 and is_word(text[start - 1]):
            pos = start + 1
            continue
        yield m
        pos = end if end > start else end + 1


@dataclass(frozen=True)
class Wanted:
    """Which patterns a scan runs: those needing nothing (unless ``needed_only``) and those
    whose need is ``present`` (None: every need is), their object verbs narrowed to the groups
    in ``verbs`` (None: all; see ``narrowed``). A value (hashable), so the patterns it selects
    are worked out once per lexicon."""

    present: frozenset[str] | None
    needed_only: bool = False
    verbs: frozenset[str] | None = None

    def __call__(self, p: Pattern) -> bool:
        if not p.needs:
            return not self.needed_only
        return self.present is None or p.needs in self.present


def wanted(
    present: frozenset[str] | None,
    needed_only: bool = False,
    verbs: frozenset[str] | None = None,
) -> Wanted:
    return Wanted(present, needed_only, verbs)


def verb_groups(object_kinds: Mapping[str, Sequence[str]], held: Iterable[str]) -> frozenset[str]:
    """The object verb groups ("push", "stop" …) that take a kind in ``held`` or a file: a
    verb of another group ("stop the server" in a session with no process) names an entity no
    session in reach holds, so its mention is never resolved (resolve_refs drops it)."""
    reach = {*held, *FILE_KINDS}
    return frozenset(g for g, kinds in object_kinds.items() if reach.intersection(kinds))


def narrowed(lex: Lexicon, p: Pattern, verbs: frozenset[str]) -> Pattern | None:
    """``p`` with only the object verbs of the groups ``verbs`` (None: none is left). A shorter
    alternation is scanned faster: the pattern runs at each candidate letter of the text."""
    if p.verb_split is None:
        return p
    words = [w for w, group in lex.words["kop"].items() if group in verbs]
    if not words:
        return None
    before, after = p.verb_split
    regex = re.compile(before + ref_grammar.alternation(words, lex.space) + after)
    return dataclasses.replace(p, regex=regex, literals=required_literals(regex))


@dataclass(frozen=True)
class Prepared:
    """A text as every scan of it starts: without injected blocks (``original``), folded, the
    lexicons whose script it holds, and (``claimed``) the characters the ``not_refs`` spans
    claim, read at the first match a scan makes: most texts hold none, and then no ``not_refs``
    pattern runs on them."""

    original: str
    text: str
    lexicons: tuple[Lexicon, ...]
    # where each gate (``Pattern.gate``) matches in ``text``: found at the first scan needing it
    gated: dict[re.Pattern[str], list[int]] = field(default_factory=dict, compare=False)
    _claimed: list[bytes] = field(default_factory=list, compare=False)

    def starts(self, gate: re.Pattern[str]) -> list[int]:
        found = self.gated.get(gate)
        if found is None:
            found = self.gated[gate] = starts(gate, self.text)
        return found

    def claimed(self) -> bytes:
        """A byte a character: 1 where a ``not_refs`` span (or a quoted span) holds it."""
        if not self._claimed:
            self._claimed.append(_claimed(self.text, self.lexicons))
        return self._claimed[0]


def prepare(text: str, lexicons: Sequence[Lexicon], languages: Sequence[str]) -> Prepared:
    original = strip_injected(text)
    folded = fold(original)
    ascii_only = folded.isascii()  # kept by the string: no scan
    read = tuple(
        x
        for x in lexicons
        if x.lang in languages
        and (not x.script or ((x.script_in_ascii or not ascii_only) and x.script.search(folded)))
    )
    return Prepared(original, folded, read)


def _claimed(folded: str, read: Sequence[Lexicon]) -> bytes:
    # Characters already claimed: testing a span against a list of every earlier one was
    # quadratic in the mentions (``it it it …``); a mask costs the span's length.
    taken = bytearray(len(folded))
    for lex in read:
        for p in lex.not_refs:
            if not possible(folded, p.literals):
                continue
            for m in matches(p, folded):
                taken[m.start() : m.end()] = b"\x01" * (m.end() - m.start())
    for start, end in quoted_spans(folded):  # a pasted log, a quote: not the user's request
        taken[start:end] = b"\x01" * (end - start)
    return bytes(taken)


# (lexicon, kinds, min_base, select) -> the patterns a scan runs; lexicons and kinds are loaded
# once (``load_lexicons``), kept in the entry so their ids are never reused meanwhile
_RUNNABLE: dict[tuple[int, int, float, Wanted], tuple[Lexicon, Any, list[tuple[int, Pattern]]]]
_RUNNABLE = {}
_RUNNABLE_MAX = 256  # a few lexicons × thresholds × sorts present: emptied past it


def runnable(
    lex: Lexicon, kinds: Mapping[str, Kind], min_base: float, select: Wanted
) -> list[tuple[int, Pattern]]:
    """The patterns a scan runs, with their ranks: selected, of a kind that can reach
    ``min_base``."""
    key = (id(lex), id(kinds), min_base, select)
    hit = _RUNNABLE.get(key)
    if hit is not None and hit[0] is lex and hit[1] is kinds:
        return hit[2]
    out = []
    for rank, p in enumerate(lex.patterns):
        kind = kinds[p.kind]
        untyped = kinds[kind.untyped] if kind.untyped else kind
        if select(p) and max(kind.base, untyped.base) >= min_base:
            run = p if select.verbs is None else narrowed(lex, p, select.verbs)
            if run is not None:
                out.append((rank, run))
    if len(_RUNNABLE) >= _RUNNABLE_MAX:
        _RUNNABLE.clear()
    _RUNNABLE[key] = (lex, kinds, out)
    return out
