"""Calls an assistant made at once, several in one message: what they made was made together, so
"the folder you just created" after two parallel ``mkdir`` calls means neither more than the other
(their order in the message is not the order they ran in). Each such event carries ``batch``: the
first call's id of its message; an event of a call made alone carries none."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rules.activity.storable import stored_id
from rules.messages import call_id

KEY = "batch"


def batch_of(message: Mapping[str, Any]) -> str | None:
    """The batch of the calls of ``message``: its first call's id when it holds several."""
    listed = message.get("tool_calls")
    if not isinstance(listed, list) or len(listed) < 2 or not isinstance(listed[0], dict):
        return None
    return stored_id(call_id(listed[0])) or None


def mark(events: Iterable[dict[str, Any]], batches: Mapping[str, str]) -> None:
    """Set the batch of each new event whose call was one of several (``batches``: stored call id
    -> batch)."""
    if batches:
        for event in events:
            batch = batches.get(event.get("call_id") or "")
            if batch is not None:
                event[KEY] = batch


def same_batch(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    batch = a.get(KEY)
    return batch is not None and batch == b.get(KEY)
