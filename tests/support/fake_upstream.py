"""A fake OpenAI-compatible upstream on 127.0.0.1, run by uvicorn in a thread. It records every
request it receives and answers as scripted: JSON, SSE (optionally holding back the rest of the
stream until released), or an error status."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.support.live import serve_in_thread


@dataclass
class Script:
    status: int = 200
    content: str = "Hello from the fake upstream."
    tool_calls: list[dict[str, Any]] | None = None
    error_body: dict[str, Any] | None = None
    delay_s: float = 0.0
    # Streaming: after the first chunk, wait for ``release`` before sending the rest.
    hold_after_first_chunk: bool = False
    usage: dict[str, Any] = field(
        default_factory=lambda: {
            "prompt_tokens": 11,
            "completion_tokens": 7,
            "total_tokens": 18,
            "prompt_tokens_details": {"cached_tokens": 5},
        }
    )


class FakeUpstream:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.script = Script()
        self.release = threading.Event()
        self.url = ""
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    @property
    def last(self) -> dict[str, Any]:
        return self.requests[-1]

    def reset(self) -> None:
        self.requests.clear()
        self.headers.clear()
        self.script = Script()
        self.release.clear()

    async def _models(self, request: Request) -> Response:
        data = {"object": "list", "data": [{"id": "gpt-4o", "object": "model", "created": 0}]}
        return Response(orjson.dumps(data), media_type="application/json")

    async def _chat(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.requests.append(body)
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        script = self.script
        if script.delay_s:
            await asyncio.sleep(script.delay_s)
        if script.status >= 400:
            err = script.error_body or {
                "error": {"message": "boom", "type": "server_error", "param": None, "code": None}
            }
            return Response(orjson.dumps(err), script.status, media_type="application/json")
        if body.get("stream"):
            return StreamingResponse(self._stream(body, script), media_type="text/event-stream")
        message: dict[str, Any] = {"role": "assistant", "content": script.content}
        if script.tool_calls:
            message["tool_calls"] = script.tool_calls
            message["content"] = None
        finish = "tool_calls" if script.tool_calls else "stop"
        data = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": script.usage,
        }
        return Response(orjson.dumps(data), media_type="application/json")

    async def _stream(self, body: dict[str, Any], script: Script):  # type: ignore[no-untyped-def]
        words = script.content.split(" ")
        for i, word in enumerate(words):
            chunk = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": (" " if i else "") + word},
                        "finish_reason": None,
                    }
                ],
            }
            yield b"data: " + orjson.dumps(chunk) + b"\n\n"
            if i == 0 and script.hold_after_first_chunk:
                while not self.release.is_set():
                    await asyncio.sleep(0.01)
        final = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": body.get("model"),
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": script.usage,
        }
        yield b"data: " + orjson.dumps(final) + b"\n\n"
        yield b"data: [DONE]\n\n"


def start_fake_upstream() -> tuple[FakeUpstream, Any]:
    fake = FakeUpstream()
    server, url = serve_in_thread(fake.app)
    fake.url = url
    return fake, server
