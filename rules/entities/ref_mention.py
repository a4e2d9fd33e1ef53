"""A reference found in a user's text (``ref_detect``): what it names and how, for the
resolver (``ref_resolve``) to match against remembered entities."""

from __future__ import annotations

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
    needs_noun: tuple[str, ...] = ()  # kinds it cannot mean: it names no noun, its verb none
    edge: str | None = None  # the relation named: on | serves | mounts | next_to (None: in, any)
    ident: str | None = None  # what the other end is called: "5173" in "the server on port 5173"
    by: str | None = None  # the command named as its maker: "created by npm install" (ref_by)
    serving: bool = False  # its noun names what serves ("the server"): a process with a port
