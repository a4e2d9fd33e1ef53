"""A mention read as the anchor of a relation when the words around it name another entity
related to it: "the file in [the folder you just made]", "the commit on [the branch you made]",
"stop the server [on port 5173]". ``ref_detect.finish`` asks this of each mention found."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from rules.entities.ref_lexicon import Kind, Lexicon, Pattern
from rules.entities.ref_match import (
    OBJECT_WINDOW,
    Anchor,
    file_kind,
    name_hint,
    noun_type,
    object_kinds,
)
from rules.entities.ref_mention import Mention
from rules.entities.ref_scan import is_word

RELATION_WINDOW = 80  # characters before a mention read for "the file in ", "the commit on "


def _prefixes(lex: Lexicon, m: Mention) -> list[tuple[str | None, Pattern]]:
    """The relation words that may stand before ``m``: "in" before a folder only."""
    found: list[tuple[str | None, Pattern]] = []
    if lex.relation_prefix is not None and m.type == "folder":
        found.append((None, lex.relation_prefix))
    found.extend(lex.relation_prefixes)
    return found


def through(
    lex: Lexicon,
    kinds: Mapping[str, Kind],
    m: Mention,
    text: str,
    original: str,
) -> Mention:
    """``m`` as the anchor of a relation when the words just before it name another entity
    related to it ("the file in [the folder you just made]", "the commit on [the branch you
    made]", "the test file next to [that file]"), else ``m`` itself."""
    if m.type is None or m.anchor is not None or m.ident is not None:
        return m
    end = m.end or m.start + len(m.text)
    # "stop the server [on port 5173]"; not after a verb of its own ("the service you created
    # on port 80": where it was made to listen, said of the making)
    for edge, suffix in lex.relation_suffixes if m.action is None else ():
        after = suffix.regex.match(text, end, min(len(text), end + RELATION_WINDOW))
        if after is not None:
            return dataclasses.replace(
                m,
                text=original[m.start : after.end()].strip(),
                kind="relation",
                base=kinds["relation"].base,
                end=after.end(),
                edge=edge,
                ident=after.group("ident"),
            )
    lo = max(0, m.start - RELATION_WINDOW)
    words_before = text[lo : m.start].rstrip()
    for named_edge, prefix in _prefixes(lex, m):
        if prefix.tail and not words_before.endswith(prefix.tail):
            continue  # not after its relation word ("on", "next to"): its search cannot match
        hit = prefix.regex.search(text, lo, m.start)
        if hit is None or (hit.start() > 0 and is_word(text[hit.start() - 1])):
            continue
        g = hit.groupdict()
        head = noun_type(lex, g.get("type"))
        if head is None or lex.words["type"].get(g.get("type") or "") in ("weak", "format"):
            continue  # "the test report in …": a noun for what a file holds names none alone
        start = hit.start()
        before = text[max(0, start - OBJECT_WINDOW) : start]
        if named_edge is None and lex.placement is not None and lex.placement.search(before):
            return m  # "put the file in the folder you made": where it goes, not what is there
        return _related_mention(lex, kinds, m, g, head, named_edge, original, text, start)
    return m


def _related_mention(
    lex: Lexicon,
    kinds: Mapping[str, Kind],
    m: Mention,
    g: Mapping[str, str | None],
    head: str,
    edge: str | None,
    original: str,
    text: str,
    start: int,
) -> Mention:
    hint, named = name_hint(g.get("mod"))
    anchor = Anchor(
        m.type, m.action, m.actions, m.entity_actions, m.actor, m.recency, ordinal=m.ordinal
    )
    extensions, paths = file_kind(lex, g.get("type"))
    return Mention(
        text=original[start : m.start + len(m.text)].strip(),
        start=start,
        lang=m.lang,
        kind="relation",
        base=kinds["relation"].base,
        type=head,
        action=None,
        recency=False,
        hint=hint,
        named=named,
        extensions=extensions,
        paths=paths,
        kinds=object_kinds(lex, {}, text, (start, m.start + len(m.text))),
        ordinal=int(lex.words["ord"][o]) if (o := g.get("ord")) else None,
        anchor=anchor,
        edge=edge,
    )
