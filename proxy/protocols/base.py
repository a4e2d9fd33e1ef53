"""What every protocol adapter offers, and the chat view it produces.

Each lowered message carries a provenance tag under ``TAG``: which part of the client's structure
it stands for. Rules copy messages with ``dict(m)`` when they change one, so the tag survives an
edit and the adapter knows where to write the change back; a message without a tag is one the
rules made (a synthetic tool result, a dropped-turns line, a trailing injected block). A message
the rules left alone is the very object the adapter lowered, and is lifted back as the client's
own bytes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rules.base import Message
from rules.messages import PLACEHOLDER_PREFIX, SOURCE_TAG

TAG = SOURCE_TAG  # the provenance tag on lowered messages (never forwarded)


@dataclass
class Lowered:
    """A request in the chat view, plus what the adapter needs to lift the rules' edits back."""

    messages: list[Message]
    tools: list[Any] | None
    # structural repairs the adapter itself made (in the rules' report shape)
    repairs: list[dict[str, Any]] = field(default_factory=list)
    # the adapter's own bookkeeping (source parts by tag …)
    state: Any = None
    # each message's bytes with sorted keys, where the adapter knows them (kept lowerings): the
    # runner's records are keyed by them, so it need not serialise those messages again
    serialised: list[bytes | None] | None = None
    # set by ``lift``: what the final check reads of each forwarded message, where the adapter
    # knows it from the message's content (``proxy.protocols.checks``); None: read by the check
    known_facts: list[Any] | None = None
    # set by ``lift``: the forwarded body's bytes (``orjson.dumps`` of it), where the adapter
    # has every message's bytes already (those it kept); None: to be written
    data: bytes | None = None
    # what names the session when nothing else does (``session_key``'s hash of the first system
    # and user text), where it is not ``messages``: Gemini CLI regenerates the environment it
    # puts before the first prompt on every resume (None: ``messages``). Made from ``messages``
    # only when asked for (``conversation``): most requests name their session otherwise
    session_view: Callable[[list[Message]], list[Message]] | None = None

    def conversation(self) -> list[Message]:
        """The messages that name the session when nothing else does (``session_view``)."""
        return self.messages if self.session_view is None else self.session_view(self.messages)


class Adapter(Protocol):
    """One inbound protocol's mapping to and from the chat view."""

    name: str

    def lower(self, body: dict[str, Any], session: str | None = None) -> Lowered:
        """The chat view of a validated body (the body itself is never changed). ``session``: a
        key naming the request's session, where the adapter reuses what it derived from the
        session's previous request (None: nothing reused)."""

    def lift(
        self,
        body: dict[str, Any],
        lowered: Lowered,
        messages: list[Message],
        hashes: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """The body to forward: ``body`` with the rules' output ``messages`` written back as
        patches. Returns ``body`` itself when nothing changed. ``hashes``: each output message's
        ``content_hash`` (tag included) when the caller knows them: they key kept liftings."""

    def hidden_text(self, body: dict[str, Any], lowered: Lowered | None = None) -> dict[str, str]:
        """Text the chat view does not show (thinking, reasoning), by section, for ``measure``.
        ``lowered``: the request ``body`` is, or was lifted from (what the adapter knows of its
        messages spares reading them all)."""

    def violations(self, forwarded: dict[str, Any], lowered: Lowered) -> list[str]:
        """The final integrity check of the body forwarded, in the protocol's own terms
        (``proxy.protocols.checks``): what would make the provider refuse it. Empty: none."""


def opaque_note(kinds: list[Any]) -> str:
    """The chat view's text for a turn made only of blocks or items the rules cannot read
    (server-side tool calls, thinking): a placeholder naming their kinds, so the turn is not
    taken for an empty one. Lifting never writes it back."""
    names = sorted({k for k in kinds if isinstance(k, str)})[:8]
    shown = ", ".join(n[:40] for n in names) or "items"
    return f"{PLACEHOLDER_PREFIX} {shown} kept as sent]"


def strip_tag(message: Message) -> Message:
    """``message`` without the provenance tag (a copy only when it has one)."""
    if TAG not in message:
        return message
    out = dict(message)
    del out[TAG]
    return out
