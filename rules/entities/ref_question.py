"""Which message of a request is the user's latest own question (``resolve_refs``): a user-role
message the user wrote, not one the proxy or the harness did, looked for near the end first."""

from __future__ import annotations

from collections.abc import Sequence

from rules.base import ListMemo, Message
from rules.entities.ref_detect import strip_injected
from rules.messages import (
    INJECT_OPEN,
    PLACEHOLDER_PREFIX,
    harness_turn,
    last_where,
    text_of,
)

LATEST_MEMO = "resolve_refs_latest"  # ``Context.memo`` name: the user's latest message, found


def _users_own(message: Message) -> bool:
    if message.get("role") != "user":  # role(), inlined: most of the request is read
        return False
    text = text_of(message.get("content"))
    own = strip_injected(text) if INJECT_OPEN in text else text
    if not own or own.isspace():
        return False
    if own[0].isspace():  # rare: only then is a stripped copy made
        own = own.lstrip()
    # nor a turn the harness wrote (a compaction's summary retells the session's references)
    return not (own.startswith(PLACEHOLDER_PREFIX) or harness_turn(own))


# How far from the end the user's latest own message is looked for before the incremental search
# (``last_where``): agents whose tool results are user messages keep it near the end.
NEAR_END = 64


def latest_own(messages: Sequence[Message], memo: ListMemo, near: int | None) -> int | None:
    """The index of the user's latest own message: looked for from ``near``, the last user-role
    message (``last_of_role``), down to ``NEAR_END`` from the end first (a new question is the
    last message or near it: a walk of a few messages costs less than comparing the whole list
    with the session's last one), then by ``last_where`` (a long tool loop since, or results
    sent as user messages)."""
    if near is not None:
        for i in range(near, max(-1, len(messages) - 1 - NEAR_END), -1):
            if _users_own(messages[i]):
                return i
    return last_where(messages, _users_own, memo, LATEST_MEMO)
