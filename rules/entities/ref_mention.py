"""A reference found in a user's text (``ref_detect``): what it names and how, for the
resolver (``ref_resolve``) to match against remembered entities."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rules.entities.ref_match import Anchor


@dataclass(frozen=True)
class Mention:
    text: str
    start: int
    lang: str
    kind: str
    base: float  # the kind's base confidence
    type: str | None  # file | folder | None (any)
    action: str | None  # the verb's group: create | write | delete | … | None (no verb)
    recency: bool  # a recency word ("just", "earlier", "刚", "방금", "さっき") was part of it
    actions: tuple[str, ...] = ()  # entity actions the verb fits (empty: any)
    actor: str | None = None  # self ("you") | speaker ("I", "we") | other ("the lead agent")
    crowd: bool = False  # confidence drops with each extra candidate
    hint: str | None = None  # a word before the type noun ("config", "jsonl"): names may hold it
    how: str | None = None  # the making's own verb: "the folder you cloned" (clone) only
    detail: str | None = None  # a name said beside the noun (ref_detail): kept if one holds it
    named: bool = False  # the hint is a file name ("the day-8.md file"): only that name fits
    extensions: tuple[str, ...] = ()  # a format was named ("the csv", "the json file")
    paths: tuple[str, ...] = ()  # a kind of file was named ("the Dockerfile"): words its path holds
    rank: int = 0  # the pattern's place in its language's list: of two overlapping, the first wins
    end: int = 0  # where its match ended
    entity_actions: tuple[str, ...] = ()  # actions of entities beyond files the verb fits
    kinds: tuple[str, ...] = ()  # kinds its verb takes ("push it": branch, tag …; empty: any)
    verb: str | None = None  # that verb's group ("stop", "restart", "push" …)
    ordinal: int | None = None  # a position in a list: "the second customer"
    anchor: Anchor | None = None  # a relation: the entity it is named through
    other: bool = False  # "the other container": not the one dealt with last (``ref_other``)
    before: bool = False  # "the container before that one": made before the one dealt with last
    needs_noun: tuple[str, ...] = ()  # kinds it cannot mean: it names no noun, its verb none
    edge: str | None = None  # the relation named: on | serves | mounts | next_to (None: in, any)
    ident: str | None = None  # what the other end is called: "5173" in "the server on port 5173"
    by: str | None = None  # the command named as its maker: "created by npm install" (ref_by)
    serving: bool = False  # its noun names what serves ("the server"): a process with a port
    # a noun read in a sense of its own: "copy" ("the copy", "the backup": copies only),
    # "variable" (a bare "the variable you exported": an environment variable, unless code)
    sense: str | None = None


NO_NOUN = "-"  # a noun that names nothing as said (``noun_sense``)


def one_noun(
    types: Mapping[str, str], mod: str | None, noun: str
) -> tuple[str, str | None, str | None]:
    """(the noun, the word left before it, the noun's type): the word before joined to the noun
    where the two make one, written as one ("公钥文件") or naming another kind than the last word
    ("the github repo": not a folder; "the shell variable": an environment variable)."""
    if mod and f"{mod}{noun}" in types:
        return f"{mod}{noun}", None, types[f"{mod}{noun}"]
    typ = types.get(noun)
    wider = types.get(f"{mod} {noun}") if mod and typ else None
    if wider is not None and wider != typ:
        return f"{mod} {noun}", None, wider
    return noun, mod, typ


def noun_sense(typ: str | None, action: str | None) -> tuple[str | None, str | None]:
    """(the kind a noun's type names as said, the sense it is read in). "the copy you made",
    "the backup": a copy of any kind; "the variable you exported" or "set": an environment
    variable, but not one "added" or "created" (in code, a variable of the program). A word before
    it that makes one noun of two ("the shell variable") was read as that noun before."""
    if typ == "copy":
        return "any", "copy"
    if typ == "variable":
        return ("env_var" if action == "write" else NO_NOUN), "variable"
    return typ, None
