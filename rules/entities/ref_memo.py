"""resolve_refs' answer to a question, kept while nothing it was worked out from changes: in an
agent's tool loop the same user message is resolved again on every request, against the same
entities. Kept in the session's ``Context.memo`` (inside the session memos, so per principal and
session), one answer a session: the next question, or a new entity, replaces it.

The answer is a function of the mentions, the options, the question's time and the events of
each session searched that are fresh now. The key holds the first three, and for each session
the events as a tuple of the very objects (rules never edit state in place, and the state cache
hands the same objects back), with the first-seen times that tell whether the clock has aged one
out since (``entity_cache.still_fresh``). The session's own events first seen after the question
are never candidates (``resolve_refs``), so those the tool loop adds after the kept ones leave
the answer as it is; any other change (one gone, moved, replaced) is a miss. The answer is kept
as JSON and parsed afresh on each hit: the report handed on is never an object an earlier
request's report holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import islice
from operator import is_
from typing import Any

import orjson

from rules.base import Context, Message
from rules.entities import cache as entity_cache
from rules.entities.ref_detect import Mention
from rules.report import Reference

MEMO = "resolve_refs.answer"  # ``Context.memo`` name
QUESTION = "resolve_refs.question"  # the session's latest question and its mentions


# ``Question.summary`` of a question read with ancestor sessions in reach: never a summary
ANCESTRAL = object()


@dataclass(frozen=True)
class Question:
    """The latest user message a request read, as the next one would read it again: the very
    object (kept, never edited in place), its text as scanned, the mentions found in it with
    these options and the sorts of entities then ``present``, and the session summary those
    sorts were read from when the session alone was in reach (else ``ANCESTRAL``)."""

    message: Message
    text: str
    cfg: object
    present: str
    found: tuple[Mention, ...]
    summary: object = ANCESTRAL


def asked_again(
    ctx: Context, cfg: object, present: str, latest: int, summary: object = ANCESTRAL
) -> tuple[int, str, Any] | None:
    """(index, text, mentions) of the session's question when the user's latest message, at
    ``latest`` (the last user-role message: it can only be the question if it is that object),
    is the very one read last time (a tool loop's next request), with the same options and
    sorts. ``summary``: what the sorts were read from now (see ``Question``), kept with the
    question when it is another object (kinds changed, not the sorts) so
    ``nothing_asked_again`` knows it on the next request."""
    kept = ctx.memo.get(QUESTION)
    if not kept:
        return None
    q = kept[0][1]
    if not isinstance(q, Question) or q.cfg is not cfg or q.present != present:
        return None
    if ctx.messages[latest] is not q.message:
        return None
    if q.summary is not summary:
        keep_question(ctx, replace(q, summary=summary))
    return latest, q.text, q.found


def nothing_asked_again(ctx: Context, cfg: object, summary: object, latest: int) -> bool:
    """Whether the request is a tool loop's next one, with nothing to do: the last user-role
    message (at ``latest``) is the very question read last time, with the same options, from
    the very summary (``summary``, of the session alone) and nothing was found in it. The sorts
    present are a function of that summary and the options' packs (``scan_key.scan_key``:
    state is never edited in place), so what ``asked_again`` would hand back is known to be
    empty without working them out."""
    kept = ctx.memo.get(QUESTION)
    if not kept or ctx.ancestors:
        return False
    q = kept[0][1]
    return (
        not q.found and q.cfg is cfg and q.summary is summary and ctx.messages[latest] is q.message
    )


def keep_question(ctx: Context, question: Question) -> None:
    ctx.memo[QUESTION] = [((question.message,), question)]


@dataclass(frozen=True)
class Searched:
    """One session's events as a resolution searched them."""

    session: str
    depth: int
    events: tuple[Any, ...]  # the state's events it read, the very objects
    oldest: float  # of these, first seen of the oldest fresh (see ``entity_cache.fresh_window``)
    newest_gone: float  # and of the newest aged out
    near_oldest: float  # the same within the near window (``Config.near_seconds``)
    near_gone: float
    later_ok: bool  # events first seen after the question may follow (the session's own)


def searched(
    session: str,
    depth: int,
    stored: Sequence[Any],
    now: float,
    windows: tuple[float, float],
    asked_at: float | None,
) -> Searched:
    """How a resolution read ``stored``: for the session's own (``asked_at`` given) the events
    before the trailing ones first seen after the question, for an ancestor all of them."""
    k = len(stored)
    if asked_at is not None:
        while k and _after(stored[k - 1], asked_at):
            k -= 1
    read = tuple(stored[:k])
    ttl, near = windows
    _, oldest, gone = entity_cache.fresh_window(read, now, ttl)
    _, near_oldest, near_gone = entity_cache.fresh_window(read, now, near)
    return Searched(
        session, depth, read, oldest, gone, near_oldest, near_gone, asked_at is not None
    )


def _after(event: Any, asked_at: float) -> bool:
    seen = event.get("first_seen") if isinstance(event, dict) else None
    return isinstance(seen, (int, float)) and seen > asked_at


def _same(was: Searched, stored: Sequence[Any], asked_at: float) -> bool:
    """Whether ``stored`` holds what ``was`` read, and after it at most later events."""
    k = len(was.events)
    if len(stored) < k or (len(stored) > k and not was.later_ok):
        return False
    if not all(map(is_, islice(stored, k), was.events)):
        return False
    return all(_after(e, asked_at) for e in islice(stored, k, None))


@dataclass(frozen=True)
class Answer:
    question: str  # the question's index and digest
    asked_at: float
    cfg: object  # the options (frozen), compared by identity
    mentions: tuple[Mention, ...]
    searched: tuple[Searched, ...]
    windows: tuple[float, float]  # the entities' lifetime and the near window, seconds
    refs: bytes  # the references, as JSON


def recall(
    ctx: Context,
    question: str,
    asked_at: float,
    cfg: object,
    mentions: Sequence[Mention],
    sources: Sequence[tuple[str, int, Sequence[Any]]],
) -> list[Reference] | None:
    """The kept answer if every input is the same now: ``sources`` are the sessions to search
    (id, depth, their state's events), in order."""
    kept = ctx.memo.get(MEMO)
    if not kept:
        return None
    answer = kept[0][1]
    if not (
        isinstance(answer, Answer)
        and answer.question == question
        and answer.asked_at == asked_at
        and answer.cfg is cfg
        and len(answer.searched) == len(sources)
        and answer.mentions == tuple(mentions)
    ):
        return None
    now, (ttl, near) = ctx.now, answer.windows
    for was, (session, depth, stored) in zip(answer.searched, sources, strict=True):
        if was.session != session or was.depth != depth or not _same(was, stored, asked_at):
            return None
        if not entity_cache.still_fresh(now, ttl, was.oldest, was.newest_gone):
            return None
        if not entity_cache.still_fresh(now, near, was.near_oldest, was.near_gone):
            return None
    refs: list[Reference] = orjson.loads(answer.refs)
    return refs


def keep(ctx: Context, answer: Answer) -> None:
    """Replace the session's kept answer (``Context.memo``'s entries are (messages, value))."""
    ctx.memo[MEMO] = [((), answer)]
