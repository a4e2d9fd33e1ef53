"""History restore (opt-in, ``track_entities.restore_history``): a client that sends only its
newest message in a known session (a stateless client, or an agent that starts every request as
a "new conversation") gets the session's stored earlier turns prepended.

The store keeps the non-system messages of the last request as the pipeline saw them before
pruning and injection, bounded by count and size, starting at a user message, redacted: a
restored turn says ``[REDACTED]`` where the client had sent a key. A rule never sees
the upstream's reply, so the final assistant answer of the previous turn is not part of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from rules.base import Message, Messages
from rules.messages import role
from rules.redact import redact_value

NAMESPACE = "history"
_SYSTEM = ("system", "developer")


def is_lone_turn(messages: Sequence[Message]) -> bool:
    """Only system messages and one user message: what a stateless client sends."""
    rest = [m for m in messages if role(m) not in _SYSTEM]
    return len(rest) == 1 and role(rest[0]) == "user"


def restore(messages: Messages, stored: Sequence[Any]) -> Messages | None:
    """``messages`` with the stored turns put before the newest one, or None when there is
    nothing to restore. A retried message (already stored) is not duplicated."""
    if not stored or not is_lone_turn(messages):
        return None
    earlier = [m for m in stored if isinstance(m, dict)]
    newest = next(m for m in messages if role(m) not in _SYSTEM)
    stored_newest = redact_value(newest)  # how it would have been stored
    for i in range(len(earlier) - 1, -1, -1):
        if earlier[i] == stored_newest:
            earlier = earlier[:i]
            break
    if not earlier:
        return None
    # the system messages before the newest lead; those after it (Claude Code's notices after
    # its prompt) stay after it, in the client's order
    at = next(i for i, m in enumerate(messages) if m is newest)
    lead = [m for m in messages[:at] if role(m) in _SYSTEM]
    return [*lead, *earlier, *messages[at:]]


def remember(messages: Sequence[Message], max_messages: int, max_chars: int) -> list[Message]:
    """The non-system messages to store: the newest ``max_messages`` within ``max_chars``
    (serialised), always starting at a user message so no call is cut from its result."""
    rest = [m for m in messages if role(m) not in _SYSTEM][-max_messages:]
    sizes = [len(orjson.dumps(m)) for m in rest]
    total = sum(sizes)
    start = 0
    while start < len(rest) and (role(rest[start]) != "user" or total > max_chars):
        total -= sizes[start]
        start += 1
    kept = redact_value(rest[start:])  # as one list: a result is redacted knowing its call
    return list(kept) if isinstance(kept, list) else []
