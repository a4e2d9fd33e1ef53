"""Scripted Anthropic Messages and OpenAI Responses answers for the socket-level edge upstream
(``tests.support.edge_upstream``): SSE events as each API frames them (``event:`` then
``data:``), one event per chunk, so a test can tell whether the proxy relayed them one by one."""

from __future__ import annotations

from typing import Any

import orjson

from tests.support.edge_upstream import Reply

MESSAGE_USAGE = {
    "input_tokens": 10,
    "cache_read_input_tokens": 100,
    "cache_creation_input_tokens": 20,
    "output_tokens": 1,
}
RESPONSE_USAGE = {
    "input_tokens": 130,
    "input_tokens_details": {"cached_tokens": 100},
    "output_tokens": 7,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 137,
}


def event(kind: str, **data: Any) -> bytes:
    """One SSE event, framed as Anthropic and OpenAI's Responses frame theirs."""
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **data}) + b"\n\n"


def message_events(text: str = "Hello there", output_tokens: int = 7) -> list[bytes]:
    """An Anthropic Messages stream: usage in message_start, output tokens in message_delta."""
    words = text.split(" ")
    start = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "usage": MESSAGE_USAGE,
    }
    out = [
        event("message_start", message=start),
        event("ping"),
        event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
    ]
    for i, word in enumerate(words):
        delta = {"type": "text_delta", "text": (" " if i else "") + word}
        out.append(event("content_block_delta", index=0, delta=delta))
    out += [
        event("content_block_stop", index=0),
        event(
            "message_delta",
            delta={"stop_reason": "end_turn", "stop_sequence": None},
            usage={"output_tokens": output_tokens},
        ),
        event("message_stop"),
    ]
    return out


def response_object(text: str = "Hello there", **extra: Any) -> dict[str, Any]:
    """A completed Responses answer (what ``response.completed`` carries)."""
    item = {
        "id": "msg_r1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-test",
        "output": [item],
        **extra,
        "usage": RESPONSE_USAGE,
        "metadata": {},
    }


def response_events(text: str = "Hello there", **extra: Any) -> list[bytes]:
    """A Responses stream, ending in ``response.completed`` with usage (``extra`` widens it)."""
    done = response_object(text, **extra)
    created = {**done, "status": "in_progress", "output": [], "usage": None}
    return [
        event("response.created", response=created),
        event("response.output_text.delta", item_id="msg_r1", output_index=0, delta=text),
        event("response.output_item.done", output_index=0, item=done["output"][0]),
        event("response.completed", response=done),
    ]


def sse_reply(chunks: list[bytes], **headers: str) -> Reply:
    """An event-stream reply; ``headers`` with ``_`` for ``-``."""
    extra = [(k.replace("_", "-"), v) for k, v in headers.items()]
    return Reply(headers=[("content-type", "text/event-stream"), *extra], chunks=chunks)
