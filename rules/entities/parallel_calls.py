"""Calls an assistant made at once, several in one message: what they made was made together, so
"the folder you just created" after two parallel ``mkdir`` calls means neither more than the other
(their order in the message is not the order they ran in). Each such event carries ``batch``: its
message's place in the request and its calls' ids (clients that number calls per message reuse
them); an event of a call made alone carries none. Two events are of one batch when they were seen
in the same request (``first_seen``) with the same batch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.activity.storable import stored_id
from rules.messages import call_id

KEY = "batch"
MAX_BATCH_CHARS = 200  # the state stays bounded however many calls a message holds


def batch_of(message: Mapping[str, Any], index: int) -> str | None:
    """The batch of the calls of ``message`` (at ``index`` in the request) when it holds several."""
    listed = message.get("tool_calls")
    if not isinstance(listed, list) or len(listed) < 2:
        return None
    ids: list[str] = []
    size = 0
    for c in listed:  # the ids up to the bound only: a message may hold thousands of calls
        if size >= MAX_BATCH_CHARS:
            break
        if isinstance(c, dict):
            ids.append(stored_id(call_id(c)))
            size += len(ids[-1]) + 1
    return f"{index}:{','.join(ids)}"[:MAX_BATCH_CHARS]


def mark(events: list[dict[str, Any]], spans: list[tuple[int, str | None]]) -> None:
    """Set the batch of the new events each call made (``spans``: for each call read in order,
    how many events there were before it and its batch)."""
    for k, (begin, batch) in enumerate(spans):
        if batch is None:
            continue
        end = spans[k + 1][0] if k + 1 < len(spans) else len(events)
        for event in events[begin:end]:
            event[KEY] = batch


def same_batch(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    batch = a.get(KEY)
    return batch is not None and batch == b.get(KEY) and a.get("first_seen") == b.get("first_seen")
