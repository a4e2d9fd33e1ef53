"""A reference to what the user made themselves: "I've just dropped a new export into the repo
root … use the file I just added". At the top level "I" is read as the agent's work (a user
speaks of what the agent did for them as their own: "delete the folder I just created"), but not
when the user's own words since the agent's last tool call say they made something themselves,
or worked elsewhere ("in my other terminal", "myself"): the proxy never saw that making, so the
newest thing the agent made is not what is meant. The resolution turns into an abstention
(``user_made``), its entity the one candidate. English; bounded patterns, a bounded window."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from rules.base import Message
from rules.entities.ruled_out import abstention
from rules.entities.too_recent import Span
from rules.messages import role, text_of, tool_calls
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


def said_own(messages: Sequence[Message], question: int) -> list[str]:
    """The user's words since the agent's last tool call, before the question (``question``:
    its index), newest first: at most ``_MESSAGES`` messages, ``_CHARS`` of each."""
    out: list[str] = []
    for i in range(question - 1, -1, -1):
        m = messages[i]
        if role(m) == "tool" or tool_calls(m) or len(out) >= _MESSAGES:
            break
        if role(m) == "user":
            out.append(text_of(m.get("content"))[:_CHARS])
    return out


class Said(Span, Protocol):
    """What of a mention this reads (``Mention``): its place, language and actor."""

    @property
    def actor(self) -> str | None: ...


def user_made(ref: Reference, question: str, mention: Said, own: list[str]) -> Reference:
    """``ref`` as an abstention when its mention ("the file I just added") is the speaker's and
    the user's own words (``own``, and the question outside the mention) say they made
    something themselves; else itself."""
    entity = ref.get("entity")
    if not entity or mention.actor != "speaker" or mention.lang != "en":
        return ref
    rest = question[: mention.start][-_CHARS:] + " " + question[mention.end :][:_CHARS]
    if not any(_OWN.search(text) for text in (rest, *own)):
        return ref
    return abstention(ref, "user_made", str(entity.get("path") or ""))
