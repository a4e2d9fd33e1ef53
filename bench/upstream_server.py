"""A minimal OpenAI-compatible upstream for benchmarks: answers at once, JSON or SSE.
Run: python -m bench.upstream_server PORT"""

from __future__ import annotations

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
    ctype = b"text/event-stream" if stream else b"application/json"
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", ctype)]}
    )
    if stream:
        for _ in range(5):
            await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
    else:
        await send({"type": "http.response.body", "body": COMPLETION})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
