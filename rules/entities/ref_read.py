"""The mentions in a user's question, detected once (``resolve_refs``): a long text clipped to
its start and end, prepared once for both scan layers (the text last prepared kept in one slot),
the first layer and the mentions memoised per text."""

from __future__ import annotations

import functools

from rules.entities.ref_detect import (
    Mention,
    Prepared,
    finish,
    load_lexicons,
    merge,
    prepare,
    scan_prepared,
    wanted,
)
from rules.entities.ref_scan import Wanted
from rules.memo_scope import memo_scope
from rules.text_cache import text_cache

# Entries each text memo below keeps: a question is scanned once per layer and kept with its
# session (``ref_memo``); these serve a layer another session or a later request reads again.
# A table that stays this small is never copied whole as it grows (see ``text_cache``).
MEMO_ENTRIES = 256


@text_cache(max_chars=2_000_000, max_entries=MEMO_ENTRIES)
def _clipped(text: str, limit: int) -> str:
    """A long message's start and end, the same string object while the message is cached: the
    memos below hash it, and a new copy of thousands of characters on every request of a tool
    loop would be hashed anew each time."""
    half = limit // 2
    return text[:half] + "\n" + text[-half:]


# The text last prepared: a question's two scan layers read it, and so does a session's later
# second layer (its first entity beyond files). One slot, swapped whole (safe across threads):
# a memo of every text would hold three times each, and filling it is what costs at a first scan.
# Whose request prepared it is part of the key: a hit on another tenant's text would be timed.
_last_prepared: tuple[str, str, tuple[str, ...], tuple[str, ...], Prepared] | None = None


def _prepared(text: str, extra_packs: tuple[str, ...], languages: tuple[str, ...]) -> Prepared:
    """The text as both layers of ``_scan`` read it, prepared once."""
    global _last_prepared
    last, scope = _last_prepared, memo_scope()
    if (
        last is not None
        and last[0] == scope
        and last[1] == text
        and last[2] == extra_packs
        and last[3] == languages
    ):
        return last[4]
    prep = prepare(text, load_lexicons(extra_packs)[1], languages)
    _last_prepared = (scope, text, extra_packs, languages, prep)
    return prep


def _scan_layer(
    text: str,
    extra_packs: tuple[str, ...],
    languages: tuple[str, ...],
    threshold: float,
    present: str | None,
) -> tuple[Mention, ...]:
    """One layer of mentions. ``present`` None: the patterns that need nothing; else only those
    needing what is present (a session's first commit scans its question again for these
    alone), with the object verbs of the kinds held (``scan_key``)."""
    kinds, _ = load_lexicons(extra_packs)
    prep = _prepared(text, extra_packs, languages)
    return tuple(scan_prepared(prep, kinds, threshold, _selection(present)))


# The first layer, memoised: an agent's tool loop sends the same latest user message many times,
# and a question read again with other sorts present reads the second layer alone. The second
# layer is kept by ``_mentions``' own memo, whose key holds ``present``.
_scan = text_cache(max_chars=4_000_000, max_entries=MEMO_ENTRIES)(_scan_layer)


@functools.lru_cache(maxsize=256)
def _selection(present: str | None) -> Wanted:
    """The patterns a layer runs (see ``_scan``), built once per key: the same object each time,
    so the patterns it selects are found by one lookup."""
    if present is None:
        return wanted(frozenset(), False)
    sorts, _, verbs = present.partition("#")
    return wanted(frozenset(sorts.split("|")), True, frozenset(verbs.split(",")) - {""})


@text_cache(max_chars=4_000_000, max_entries=MEMO_ENTRIES)
def _mentions(
    text: str,
    extra_packs: tuple[str, ...],
    languages: tuple[str, ...],
    threshold: float,
    present: str,
) -> tuple[Mention, ...]:
    """Kinds whose base confidence is below the threshold (a bare "it") could never resolve:
    left out."""
    kinds, lexicons = load_lexicons(extra_packs)
    layers = [_scan(text, extra_packs, languages, threshold, None)]
    if present:
        layers.append(_scan_layer(text, extra_packs, languages, threshold, present))
    found = finish(
        text, kinds, lexicons, merge(*layers), lambda: _prepared(text, extra_packs, languages)
    )
    return tuple(m for m in found if m.base >= threshold)
