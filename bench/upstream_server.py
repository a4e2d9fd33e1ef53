"""A minimal upstream for benchmarks: answers at once, JSON or SSE, in the protocol of the path:
OpenAI chat completions (any path not below), Anthropic Messages (``/v1/messages``), the
Responses API (``/v1/responses``, ``/responses``) and Gemini (``…:generateContent``,
``…:streamGenerateContent``: SSE with ``alt=sse``, else the JSON-array stream). Each answer is
a fixed, valid one ("ok" or five "tok " deltas), so clients and other proxies (LiteLLM) can parse
it.
Run: python -m bench.upstream_server PORT [DELAY_MS]: with DELAY_MS, each answer starts that many
milliseconds after the request was read (a model is never instant; what the proxy does meanwhile,
such as saving a session, is then off the client's path as it would be in use)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import orjson
import uvicorn

COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    }
)
CHUNK = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"gpt-4o",'
    b'"choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}\n\n'
)
CHAT_STREAM = [CHUNK] * 5 + [b"data: [DONE]\n\n"]

_USAGE = {"input_tokens": 10, "output_tokens": 1}
MESSAGE = orjson.dumps(
    {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "claude-bench",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": _USAGE,
    }
)


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


MESSAGES_STREAM = [
    _event(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_bench",
                "type": "message",
                "role": "assistant",
                "model": "claude-bench",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 0},
            },
        },
    ),
    _event(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    *[
        _event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "tok "},
            },
        )
        for _ in range(5)
    ],
    _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
    _event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
    ),
    _event("message_stop", {"type": "message_stop"}),
]

_OUTPUT_ITEM = {
    "type": "message",
    "id": "msg_bench",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "ok", "annotations": []}],
}


def _response(status: str, output: list[Any]) -> dict[str, Any]:
    return {
        "id": "resp_bench",
        "object": "response",
        "created_at": 0,
        "status": status,
        "model": "gpt-bench",
        "output": output,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 1,
            "total_tokens": 11,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        if status == "completed"
        else None,
    }


RESPONSE = orjson.dumps(_response("completed", [_OUTPUT_ITEM]))
_PART = {"type": "output_text", "text": "", "annotations": []}
RESPONSES_STREAM = [
    _event(
        "response.created",
        {
            "type": "response.created",
            "sequence_number": 0,
            "response": _response("in_progress", []),
        },
    ),
    _event(
        "response.output_item.added",
        {
            "type": "response.output_item.added",
            "sequence_number": 1,
            "output_index": 0,
            "item": {**_OUTPUT_ITEM, "status": "in_progress", "content": []},
        },
    ),
    _event(
        "response.content_part.added",
        {
            "type": "response.content_part.added",
            "sequence_number": 2,
            "item_id": "msg_bench",
            "output_index": 0,
            "content_index": 0,
            "part": _PART,
        },
    ),
    *[
        _event(
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "sequence_number": 3 + k,
                "item_id": "msg_bench",
                "output_index": 0,
                "content_index": 0,
                "delta": "tok ",
            },
        )
        for k in range(5)
    ],
    _event(
        "response.output_item.done",
        {
            "type": "response.output_item.done",
            "sequence_number": 8,
            "output_index": 0,
            "item": _OUTPUT_ITEM,
        },
    ),
    _event(
        "response.completed",
        {
            "type": "response.completed",
            "sequence_number": 9,
            "response": _response("completed", [_OUTPUT_ITEM]),
        },
    ),
]


def _gemini_chunk(text: str, last: bool) -> dict[str, Any]:
    content = {"parts": [{"text": text}], "role": "model"}
    candidate: dict[str, Any] = {"content": content, "index": 0}
    if last:
        candidate["finishReason"] = "STOP"
    usage = {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11}
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-bench"}


GEMINI = orjson.dumps(_gemini_chunk("ok", True))
GEMINI_STREAM = [b"data: " + orjson.dumps(_gemini_chunk("tok ", k == 4)) + b"\r\n\r\n"
                 for k in range(5)]  # fmt: skip
GEMINI_ARRAY = [orjson.dumps([_gemini_chunk("tok ", k == 4) for k in range(5)])]


def _answer(path: str, stream: bool, query: bytes = b"") -> tuple[bytes, list[bytes]]:
    """(content type, body chunks) for a request to ``path``."""
    if path.endswith(":generateContent"):
        return b"application/json", [GEMINI]
    if path.endswith(":streamGenerateContent"):
        if b"alt=sse" in query:
            return b"text/event-stream", GEMINI_STREAM
        return b"application/json", GEMINI_ARRAY
    if path.endswith("/messages"):
        return (
            (b"text/event-stream", MESSAGES_STREAM) if stream else (b"application/json", [MESSAGE])
        )
    if path.endswith("/responses"):
        return (
            (b"text/event-stream", RESPONSES_STREAM)
            if stream
            else (b"application/json", [RESPONSE])
        )
    return (b"text/event-stream", CHAT_STREAM) if stream else (b"application/json", [COMPLETION])


DELAY_S = float(sys.argv[2]) / 1000 if __name__ == "__main__" and len(sys.argv) > 2 else 0.0


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    stream = b'"stream":true' in body or b'"stream": true' in body
    ctype, chunks = _answer(scope["path"], stream, scope.get("query_string", b""))
    if DELAY_S:
        await asyncio.sleep(DELAY_S)
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", ctype)]}
    )
    for chunk in chunks[:-1]:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": chunks[-1]})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
