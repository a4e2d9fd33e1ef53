"""Detecting vague references to files and folders in a user's text, in English, Chinese, Korean,
Japanese, Spanish, French, German and Portuguese: "the folder I just created", "the directory
that got made", "that thing from a bit ago", "主代理建的那个目录", "방금 생성된 파일",
"親エージェントが消したディレクトリ", "la carpeta que acabas de crear", "le dossier que tu viens de
créer". The grammar and word lists come from the ``references`` pack (expanded by
``ref_grammar``, compiled by ``ref_lexicon``); this module applies them. Text the proxy injected
earlier is ignored.

The text is lower-cased once (keeping each character's position), a language whose script the
text lacks is not read at all, a template's leading ``\\b`` is checked per match, and each match
becomes a ``Mention``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from rules.entities.ref_antecedent import name_goes_on, named_before, pronoun_stands_for_named
from rules.entities.ref_by import by_command, how_made
from rules.entities.ref_detail import detail_near
from rules.entities.ref_lexicon import Kind, Lexicon, Pattern, load_lexicons
from rules.entities.ref_match import (
    FILE_TYPES,
    Anchor,
    file_kind,
    name_hint,
    needs_noun,
    object_kinds,
    object_verb,
    ordinal_after,
    ordinal_before,
    relation_anchor,
    slot_word,
)
from rules.entities.ref_mention import NO_NOUN, Mention, noun_sense, one_noun
from rules.entities.ref_prefilter import PREFILTER_MIN_CHARS, possible
from rules.entities.ref_relate import through
from rules.entities.ref_scan import (
    Prepared,
    Wanted,
    fold,
    matches,
    matches_at,
    prepare,
    runnable,
    strip_injected,
    wanted,
)

__all__ = [
    "Anchor",
    "Kind",
    "Lexicon",
    "Mention",
    "Pattern",
    "Prepared",
    "detect",
    "fold",
    "load_lexicons",
    "prepare",
    "strip_injected",
    "wanted",
]


def detect(
    text: str,
    kinds: Mapping[str, Kind],
    lexicons: Sequence[Lexicon],
    languages: Sequence[str],
    min_base: float = 0.0,
    present: frozenset[str] | None = None,
) -> list[Mention]:
    """Mentions in order of position; of overlapping matches, the earlier pattern wins. Kinds
    whose confidence cannot reach ``min_base`` are not looked for, nor patterns that need
    entities of a sort not ``present`` (``objects``, ``listed``, ``related``; None: all are)."""
    found = scan(text, kinds, lexicons, languages, min_base, wanted(present))
    return finish(text, kinds, lexicons, found)


def scan(
    text: str,
    kinds: Mapping[str, Kind],
    lexicons: Sequence[Lexicon],
    languages: Sequence[str],
    min_base: float,
    select: Wanted,
) -> list[Mention]:
    """The mentions the ``select``-ed patterns find (see ``detect``), before ``finish``."""
    return scan_prepared(prepare(text, lexicons, languages), kinds, min_base, select)


def scan_prepared(
    prep: Prepared, kinds: Mapping[str, Kind], min_base: float, select: Wanted
) -> list[Mention]:
    """``scan`` of a prepared text: several scans of one text share its preparation."""
    text, original = prep.text, prep.original
    taken: bytearray | None = None  # the not_refs' claims, read at the first match
    gated = len(text) >= PREFILTER_MIN_CHARS
    found: list[Mention] = []
    for lex in prep.lexicons:
        for rank, p in runnable(lex, kinds, min_base, select):
            if not possible(text, p.literals):
                continue  # a string every match holds is not in the text
            # a long text: a pattern beginning with the language's phrase is tried where it is
            gate = p.gate if gated else None
            hits = matches(p, text) if gate is None else matches_at(p, text, prep.starts(gate))
            for m in hits:
                start, end = m.span()
                if taken is None:
                    taken = bytearray(prep.claimed())
                if start == end or taken.find(1, start, end) >= 0:
                    continue
                mention = _mention(lex, p, kinds, m, original, text, rank)
                if mention is not None:
                    taken[start:end] = b"\x01" * (end - start)
                    found.append(mention)
    return found


def merge(*layers: Sequence[Mention]) -> list[Mention]:
    """Mentions of separate scans as one scan would have found them: of overlapping ones, the
    earlier pattern's wins. Linear: a mask of claimed characters per language."""
    found = [m for layer in layers for m in layer]
    if sum(1 for layer in layers if layer) <= 1:  # one scan's mentions never overlap
        return sorted(found, key=lambda m: (m.rank, m.start))
    size = max((m.end for m in found), default=0)
    masks: dict[str, bytearray] = {}
    out: list[Mention] = []
    for m in sorted(found, key=lambda m: (m.rank, m.start)):
        mask = masks.setdefault(m.lang, bytearray(size))
        if m.end > m.start and mask.find(1, m.start, m.end) < 0:
            mask[m.start : m.end] = b"\x01" * (m.end - m.start)
            out.append(m)
    return out


def finish(
    text: str,
    kinds: Mapping[str, Kind],
    lexicons: Sequence[Lexicon],
    found: Sequence[Mention],
    prepared: Callable[[], Prepared] | None = None,
) -> list[Mention]:
    """Found mentions in order of position, each read as a relation's anchor when the words
    before it say so ("the file in [the folder you just made]"); a mention within those words
    gives way. ``prepared``: the text as the scans read it (``prepare``), when kept."""
    if not any(m.type is not None and m.anchor is None and m.ident is None for m in found):
        return sorted(found, key=lambda x: x.start)  # no anchor: nothing to read before one
    if prepared is not None:
        prep = prepared()
        original, text = prep.original, prep.text
    else:
        original = strip_injected(text)
        text = fold(original)
    lex_of = {x.lang: x for x in lexicons}
    done = [through(lex_of[m.lang], kinds, m, text, original) for m in found]
    prefix = bytearray(len(text) + 1)  # the words a relation read before its anchor
    for new, old in zip(done, found, strict=True):
        if new is not old:
            prefix[new.start : old.start] = b"\x01" * (old.start - new.start)
    kept = [
        m
        for m, old in zip(done, found, strict=True)
        if m is not old or prefix.find(1, m.start, max(m.end, m.start + 1)) < 0
    ]  # a mention overlapping a relation's words ("revert [the commit] on …") gives way
    return sorted(kept, key=lambda x: x.start)


def _mention(
    lex: Lexicon,
    p: Pattern,
    kinds: Mapping[str, Kind],
    m: re.Match[str],
    original: str,
    text: str,
    rank: int = 0,
) -> Mention | None:
    """The mention a match makes, or None: a weak noun ("log", "report") without a verb, or
    an actor its kind does not take."""
    kind_name = p.kind
    g = m.groupdict()
    verb_word = slot_word(g, "verb") or slot_word(g, "verb_base") or ""
    action = lex.words["verb"].get(slot_word(g, "verb") or "") or lex.words["verb_base"].get(
        slot_word(g, "verb_base") or ""
    )
    actor = lex.words["actor"].get(slot_word(g, "actor") or "")
    anchor = None
    noun = slot_word(g, "type") or p.noun or ""
    if p.head:
        head, anchor = relation_anchor(lex, p, g, action, actor)
        noun = head or ""
        if not p.verb_head:
            action, actor = None, None
    noun, g["mod"], typ = one_noun(lex.words["type"], g.get("mod"), noun)
    if typ == "project":  # "the project you just created", not "this project" (the workspace)
        made = action is not None and (actor or slot_word(g, "rec"))
        if not (made or slot_word(g, "rec_adj") or anchor):
            return None
        typ = "folder"
    typ, sense = noun_sense(typ, action)
    if typ == NO_NOUN:
        return None
    recent = slot_word(g, "rec") or slot_word(g, "rec_adj")
    if typ == "branch" and action != "create" and recent in lex.words["prior"]:
        return None  # "the previous branch": the one before the current, not the newest made
    if anchor is not None and not p.verb_head and anchor.type == "file" and p.edge is None:
        return None  # "the last commit in that file": nothing is inside a file
    if kind_name == "other" and typ in (None, "any"):
        return None  # "the other one": of which kind is not said
    if kind_name == "demonstrative" and g.get("mod") and typ not in FILE_TYPES:
        return None  # "issues that require user input": "that" is a relative pronoun there
    if kind_name in ("demonstrative", "recent") and name_goes_on(text, m.end()):
        return None  # "it looks to me that library.py is …": the noun is a name's start
    weak = typ == "weak"
    if weak:
        if action is None:
            return None
        typ = "file"
    if kind_name == "object" and g.get("pron"):
        kind_name = "pronoun_op"  # "push it"
    elif kind_name == "object" and typ in FILE_TYPES:
        return None  # "open the file": a verb and a noun alone name no file (too common)
    if kind_name == "pronoun_op" and pronoun_stands_for_named(lex, text, m.start()):
        return None  # "if the cache directory exists, delete it": "it" is that directory
    if kind_name == "demonstrative" and typ in FILE_TYPES and named_before(lex, text, m.start()):
        return None  # "… notes in apple_books.md … he described it in that file": that one
    kind = kinds[kind_name]
    if typ in (None, "any") and kind.untyped:
        kind_name, kind = kind.untyped, kinds[kind.untyped]
    if kind.actor is not None and actor != kind.actor:
        return None
    hint, named = name_hint(g.get("mod"))
    ordinal = lex.words["ord"].get(o) if (o := g.get("ord")) else None
    mod = " ".join((g.get("mod") or "").lower().split())  # "second  to last": one space
    if ordinal is None and mod in lex.words["ord"]:  # "the first file you created": a place
        ordinal, hint = lex.words["ord"][mod], None
    if ordinal is None and kind_name == "described" and not recent:
        # "2番目に作ったフォルダ": made second; "最初にさっき作ったフォルダを": first (do this), the
        # folder just made: a recency word says which, the ordinal orders the request's steps
        noun_first = "type" in m.re.groupindex and m.start("type") == m.start()
        ordinal = ordinal_before(lex, text, m.start(), noun_first)
    end = m.end()
    placeable = ordinal is None and kind_name in ("described", "object", "action_only")
    if placeable and (slot_word(g, "type") or "").lower() not in lex.words.get("plural_forms", {}):
        # "the commit before the last one", "the folder you created before the last one" (its
        # "before" read as a recency word by the match), "the one you made before the last
        # one": a place among those made ("the folders you created before the last one" are
        # several: not read)
        word = recent or ""
        opens = bool(word) and any(w.startswith(f"{word} ") for w in lex.words["ord_after"])
        at = end - len(word) if opens and text.endswith(word, 0, end) else end
        placed = ordinal_after(lex, text, at) if at == end or opens else None
        if placed is not None:
            (ordinal, end), action, recent = placed, action or "create", None
    if hint is not None and lex.words["type"].get(f"{mod} {noun}") == ("weak" if weak else typ):
        hint, noun = None, f"{mod} {noun}"  # "the database user": one noun, no part of a name
    if weak and hint is None:
        # "the summary you saved": summary.md, if there is one
        hint = name_hint(lex.words["weak"].get(noun, noun))[0]
    fmt = lex.formats.get(mod) if not noun.startswith(f"{mod} ") else None  # not "shell variable"
    extensions = lex.formats.get(noun) or fmt or ()
    if typ == "format":
        typ = "file"
    if extensions and not named:
        hint = None  # the format says more than a part of a name could
    # "the script": files of that kind; "the python script": the format says more
    paths: tuple[str, ...] = ()
    if not extensions:
        extensions, paths = file_kind(lex, noun)
    verb_kinds = object_kinds(lex, g, text, m.span())
    verb = object_verb(lex, g, text, m.span()) if verb_kinds else None
    if typ not in FILE_TYPES and noun in lex.words["file_kind"]:
        # a noun of two kinds: "the image you built" is a container image or a picture file
        # (its extensions keep the files only); a verb of one kind says which ("push the image")
        either = tuple(k for k in (typ, "file") if not verb_kinds or k in verb_kinds)
        if either:
            typ, verb_kinds = "any", either
    detail = None
    if hint is None and not extensions and not paths:  # "the q1 file", "the container of redis"
        short = len(mod) == 2 and mod.isascii() and mod.isalnum() and mod not in lex.words["ord"]
        detail = mod if short else detail_near(lex.lang, text, m.start(), m.end())
    return Mention(
        text=original[m.start() : end].strip(),
        start=m.start(),
        lang=lex.lang,
        kind=kind_name,
        base=kind.base,
        type=None if typ == "any" else typ,
        action=action,
        recency=bool(recent),
        actions=tuple(lex.groups.get(action, (action,))) if action else (),
        actor=None if actor in (None, "any") else actor,
        crowd=kind.crowd,
        hint=hint,
        named=named,
        detail=detail,
        how=how_made(verb_word),
        sense=sense,
        extensions=extensions,
        paths=paths,
        entity_actions=tuple(lex.entity_groups.get(action, ())) if action else (),
        kinds=verb_kinds,
        verb=verb,
        ordinal=int(ordinal) if ordinal is not None else None,
        anchor=anchor,
        other=kind_name == "other",
        before=kind_name == "before",
        needs_noun=needs_noun(lex, typ, action, verb_kinds),
        serving=typ == "process" and noun in lex.words["serving"],
        rank=rank,
        end=end,
        edge=p.edge,
        ident=ident.strip() if (ident := g.get("ident")) else None,
        by=(by_command(lex.lang, text, m.end()) or _program_actor(lex, text, m, g))
        if kind_name == "described"
        else None,
    )


def _program_actor(
    lex: Lexicon, text: str, m: re.Match[str], g: Mapping[str, str | None]
) -> str | None:
    """The command a program named as the maker stands for ("the bucket terraform created":
    terraform; "the folder created by npm install": npm install, as ``by_command`` reads it),
    or None when the actor is no program."""
    for name in ("actor", "actor__2", "actor__3"):
        word = g.get(name)
        if not word:
            continue
        if word not in lex.words.get("program_actor", {}):
            return None
        at = m.start(name)
        if text.endswith(" by ", 0, at):
            return by_command(lex.lang, text, at - 4) or word
        return word
    return None
