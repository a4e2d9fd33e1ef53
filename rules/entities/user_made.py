"""A reference to what the user made themselves: "I've just dropped a new export into the repo
root … use the file I just added". At the top level "I" is read as the agent's work (a user
speaks of what the agent did for them as their own: "delete the folder I just created"), but not
when the user's own words since the agent made what is pointed at say they made something
themselves, or worked elsewhere ("in my other terminal", "myself"): the proxy never saw that
making, so the newest thing the agent made is not what is meant. The resolution turns into an
abstention (``user_made``), its entity the one candidate. English; bounded patterns, a bounded
window."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol

from rules.activity.storable import stored_id
from rules.base import Message
from rules.entities.ruled_out import abstention
from rules.entities.too_recent import Span
from rules.messages import call_id, role, text_of, tool_calls
from rules.report import Reference

_MAKE = (
    r"made|created|added|dropped|put|copied|uploaded|wrote|saved|moved|generated|downloaded"
    r"|placed|cloned|built|started|launched|pushed|opened|set\s{1,3}up"
)
# "I've just dropped", "we also made", "I have already created"; "myself"; "my other terminal"
_OWN = re.compile(
    rf"\b(?:I|we)(?:'ve|\s{{1,3}}have|\s{{1,3}}just|\s{{1,3}}also|\s{{1,3}}already){{0,3}}"
    rf"\s{{1,3}}(?:{_MAKE})\b"
    r"|\b(?:myself|ourselves)\b"
    r"|\b(?:my|our|another|the\s{1,3}other|a\s{1,3}separate)\s{1,3}(?:other\s{1,3})?"
    r"(?:terminal|shell|tab|window|machine|laptop|computer)\b",
    re.IGNORECASE,
)
_MESSAGES = 8  # user messages read back, at most
_CHARS = 4_000  # of each, at most (its start)
_WALK = 200  # messages walked back, at most


def said_own(messages: Sequence[Message], question: int, since: str | None = None) -> list[str]:
    """The user's words before the question (``question``: its index), newest first, back to
    the agent's last tool call; with ``since`` (a call's id: the one that made what a reference
    points at), back to that call, the agent's later calls read past ("I created data/raw by
    hand" said after the agent's `mkdir build`, then `ls data/raw`). At most ``_MESSAGES`` user
    messages, ``_CHARS`` of each, ``_WALK`` messages walked."""
    out: list[str] = []
    for i in range(question - 1, max(question - 1 - _WALK, -1), -1):
        m = messages[i]
        if len(out) >= _MESSAGES:
            break
        calls = tool_calls(m)
        if since is None and (role(m) == "tool" or calls):
            break
        if calls and any(stored_id(call_id(c)) == since for c in calls):
            break
        if role(m) == "user":
            out.append(text_of(m.get("content"))[:_CHARS])
    return out


class Said(Span, Protocol):
    """What of a mention this reads (``Mention``): its place, language and actor."""

    @property
    def actor(self) -> str | None: ...


def user_made(
    ref: Reference,
    question: str,
    mention: Said,
    own: Callable[[str | None], list[str]],
    mentions: Sequence[Span] = (),
) -> Reference:
    """``ref`` as an abstention when its mention ("the file I just added") is the speaker's and
    the user's own words since what it points at was made (``own(its call's id)``, and the
    question outside its mentions: ``mentions``, the question's others) say they made something
    themselves; else itself. Another mention's own "I made" is no such word: "delete the folder
    I just created and the branch I made" gave up on both."""
    entity = ref.get("entity")
    if not entity or mention.actor != "speaker" or mention.lang != "en":
        return ref
    rest = _outside(question, max(mention.start - _CHARS, 0), mention.end + _CHARS,
                    [mention, *mentions])  # fmt: skip
    made_by = ref.get("call_id")
    if not any(_OWN.search(text) for text in (rest, *own(made_by if made_by else None))):
        return ref
    return abstention(ref, "user_made", str(entity.get("path") or ""))


def _outside(question: str, start: int, end: int, spans: Sequence[Span]) -> str:
    """``question[start:end]`` without the words of ``spans`` (each a mention's)."""
    pieces: list[str] = []
    at = start
    for span in sorted(spans, key=lambda s: s.start):
        if span.end <= at or span.start >= end:
            continue
        pieces.append(question[at : max(span.start, at)])
        at = span.end
    pieces.append(question[at:end] if at < end else "")
    return " ".join(pieces)
