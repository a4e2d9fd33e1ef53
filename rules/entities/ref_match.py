"""What one match of a reference pattern says, read through its language's lexicon: the
noun's kind, a word before it usable against names, the kinds the verb around it takes, the
kinds a mention without a noun cannot mean, and a relation's anchor. Used by ``ref_detect``."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

from rules.entities.ref_grammar import alternation
from rules.entities.ref_lexicon import Lexicon, Pattern

OBJECT_WINDOW = 24  # characters around a mention where its verb is looked for


@dataclass(frozen=True)
class Anchor:
    """The other entity of a relation ("the folder you just made" in "the file in the folder
    you just made"): what it is, and the verb, actor and recency that were its."""

    type: str | None
    action: str | None = None
    actions: tuple[str, ...] = ()
    entity_actions: tuple[str, ...] = ()
    actor: str | None = None
    recency: bool = False
    # its noun names a project ("さっき作ったプロジェクトのフォルダ", "你建的项目的文件夹"): the
    # project's folder is the project itself, not a folder inside it
    project: bool = False
    # its place among those made ("the file in the folder you created before the last one": -2)
    ordinal: int | None = None


def slot_word(groups: Mapping[str, str | None], slot: str) -> str | None:
    """The word a slot matched (its first filled occurrence in the template)."""
    for name in (slot, f"{slot}__2", f"{slot}__3"):
        if groups.get(name):
            return groups[name]
    return None


FILE_TYPES = (None, "any", "file", "folder", "weak", "format")
FILE_NAME = re.compile(r"[\w~-][\w.~/-]*\.[a-z0-9]+")


def name_hint(word: str | None) -> tuple[str | None, bool]:
    """(a word before the noun usable against names, whether it is a file name): "jsonl" and
    "backup" may be part of a name (plain ASCII, 3+ characters); "day-8.md" is one."""
    word = (word or "").strip()
    if FILE_NAME.fullmatch(word):
        return word, True
    plain = len(word) >= 3 and word.isascii() and word.replace("_", "").replace("-", "").isalnum()
    return (word if plain else None), False


def file_kind(lex: Lexicon, noun: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(extensions, path words) of the files a noun for a kind of file keeps ("the script":
    .py, .sh …; "the Dockerfile": a path holding "dockerfile"); ((), ()) for another noun."""
    kind = lex.file_kinds.get(lex.words["file_kind"].get(noun or "", ""))
    return (kind.extensions, kind.paths) if kind is not None else ((), ())


def noun_type(lex: Lexicon, noun: str | None) -> str | None:
    typ = lex.words["type"].get(noun or "")
    if typ == "project":
        return "folder"
    return "file" if typ in ("weak", "format") else (None if typ == "any" else typ)


def object_verb(
    lex: Lexicon, g: Mapping[str, str | None], text: str, span: tuple[int, int]
) -> str | None:
    """The group of the object verb the mention is the object of ("stop", "push" …): its own
    ``{kop}`` slot, else one just before it ("push the branch …") or just after it (CJK:
    "那个分支推送", "ブランチをプッシュ")."""
    return lex.words["kop"].get(_object_word(lex, g, text, span) or "")


def _object_word(
    lex: Lexicon, g: Mapping[str, str | None], text: str, span: tuple[int, int]
) -> str | None:
    word = g.get("kop")
    if not word and lex.object_before is not None and lex.object_after is not None:
        start, end = span
        found = lex.object_before.search(text[max(0, start - OBJECT_WINDOW) : start]) or (
            lex.object_after.search(text[end : end + OBJECT_WINDOW])
        )
        word = found.group("kop") if found else None
    return word


def object_kinds(
    lex: Lexicon, g: Mapping[str, str | None], text: str, span: tuple[int, int]
) -> tuple[str, ...]:
    """The kinds the mention's verb takes (``object_verb``'s group's kinds), or the file kinds
    for a file operation on a pronoun ("delete it") or a file verb ("cat that thing")."""
    word = _object_word(lex, g, text, span)
    group = lex.words["kop"].get(word or "")
    if group:
        return lex.object_kinds.get(group, ())
    if g.get("op"):
        return lex.op_kinds if g.get("pron") else ()  # "delete it": a file; "delete the pod"
    if word and word in lex.words["fop"]:
        # "cat that thing": a file operation; "attach to the tmux session": its noun says what;
        # "open the image": a verb that only reads a file, on a noun of a file's kind too (a
        # picture), the file's ("upload the image" may be a container image's push)
        said = (g.get("type") or "").strip().lower()
        noun = lex.words["type"].get(said)
        files = noun in (None, "any", "weak", "file", *lex.op_kinds)
        read = said in lex.words["file_kind"] and word in lex.words["fread"]
        if read and not g.get("kop") and lex.object_before is not None:
            # the verb before the mention, not a word after it ("… built less than a minute
            # ago": no reading verb)
            start = span[0]
            found = lex.object_before.search(text[max(0, start - OBJECT_WINDOW) : start])
            read = found is not None and found.group("kop") == word
        return lex.op_kinds if files or read else ()
    return ()


@functools.lru_cache(maxsize=32)
def _ordinal_pattern(
    words: tuple[str, ...], particles: tuple[str, ...], space: str
) -> re.Pattern[str]:
    """A language's ordinals as they stand just before a mention, a particle after them."""
    return re.compile(
        f"(?P<ord>{alternation(words, space)})(?:{alternation(particles, space)})\\s?$"
    )


@functools.lru_cache(maxsize=32)
def _ordinal_word_pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    """A language's ordinals as a word just before a mention's noun."""
    blank = r"\s++"
    return re.compile(f"(?<![\\w-])(?P<ord>{alternation(words, blank)})\\s++$")


def ordinal_before(lex: Lexicon, text: str, start: int, noun_first: bool = False) -> str | None:
    """The place (as the ordinals slot has it) an ordinal just before a mention gives it, where
    the language puts it outside the noun phrase, a particle after it (``ordinal_particles``):
    "2番目に作ったフォルダ" (the folder made second), "두 번째로 만든 폴더"; or, in a language
    without those, the adjective of a mention that opens with its noun ("второй контейнер,
    который ты запустил": ``noun_first``); None without one."""
    words, particles = lex.words["ord"], lex.words.get("ord_particles")
    if not words or not (particles or noun_first):
        return None
    if not particles:
        m = _ordinal_word_pattern(tuple(words)).search(text, max(0, start - 24), start)
        return words[m["ord"]] if m else None
    # keyed by the words, not the lexicon's identity (an evicted pack's id may come back)
    pattern = _ordinal_pattern(tuple(words), tuple(particles), lex.space)
    m = pattern.search(text, max(0, start - 24), start)
    return words[m["ord"]] if m else None


# what may follow a place said after the mention: its end, or a word that closes the request
# (the references pack's `not_refs` leaves the same phrase alone, with the same ends)
_ENDS = r"(?=[ \t]*+(?:[.,;:!?)\n—–]|\Z)|\s++(?:too|also|and|then|please|as\s++well)\b)"


@functools.lru_cache(maxsize=32)
def _ordinal_after_pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    """A language's places said after a mention ("… before the last one"), ending it."""
    blank = r"\s++"
    return re.compile(f"\\s*+(?P<ord>{alternation(words, blank)}){_ENDS}")


def ordinal_after(lex: Lexicon, text: str, end: int) -> tuple[str, int] | None:
    """(the place, as the ordinals slot has it, and where its words end) a phrase right after a
    mention gives it (``ordinals_after``): "the folder you created before the last one", "revert
    the commit before the last one" (-2: made before the newest); None without one."""
    words = lex.words.get("ord_after")
    if not words:
        return None
    m = _ordinal_after_pattern(tuple(words)).match(text, end)
    return (words[" ".join(m["ord"].split())], m.end()) if m else None  # "before the  last"


def needs_noun(
    lex: Lexicon, typ: str | None, action: str | None, verb_kinds: tuple[str, ...]
) -> tuple[str, ...]:
    """The kinds a mention without a noun cannot mean: none when its verb is about them
    ("the one you installed", "push it"; ``verb_kinds``: ``object_kinds`` of the mention)."""
    if typ not in (None, "any") or (action is not None and not lex.groups.get(action, (action,))):
        return ()
    return () if verb_kinds else lex.needs_noun


def relation_anchor(
    lex: Lexicon, p: Pattern, g: Mapping[str, str | None], action: str | None, actor: str | None
) -> tuple[str | None, Anchor]:
    """(the head noun, the anchor) of a relation match."""
    first, second = g.get("type"), g.get("type__2")
    head, other = (first, second) if p.head == 1 else (second, first)
    mine = None if p.verb_head else action
    anchor = Anchor(
        type=noun_type(lex, other),
        action=mine,
        actions=tuple(lex.groups.get(mine, (mine,))) if mine else (),
        entity_actions=tuple(lex.entity_groups.get(mine, ())) if mine else (),
        actor=None if actor in (None, "any") else actor,
        recency=bool(slot_word(g, "rec") or slot_word(g, "rec_adj")),
        project=lex.words["type"].get(other or "") == "project",
    )
    return head, anchor
