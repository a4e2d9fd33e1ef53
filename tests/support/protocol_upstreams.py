"""Scripted upstreams for the two agent protocols, on 127.0.0.1 (uvicorn in a thread, like
``tests/support/fake_upstream.py``), written from the wire notes in ``../shared/agents/README.md``.

* :class:`AnthropicUpstream` serves Anthropic Messages: ``POST /v1/messages`` (``?beta=true`` too),
  JSON or SSE (``message_start``, ``ping``, ``content_block_start/delta/stop`` with
  ``text_delta`` / ``input_json_delta`` / ``thinking_delta`` / ``signature_delta``,
  ``message_delta`` with ``stop_reason`` and usage, ``message_stop``), plus
  ``POST /v1/messages/count_tokens`` and Claude Code's ``HEAD /api/hello`` probe.
* :class:`ResponsesUpstream` serves the OpenAI Responses API: ``POST /v1/responses``, JSON or SSE
  (``response.created`` … ``response.output_item.done``, ``response.completed`` with usage), and
  answers Codex's websocket attempt (``GET /v1/responses`` with ``upgrade: websocket``) as told.

Both record every request (:class:`Seen`: method, path, query, headers, raw body bytes, parsed
JSON) and answer from a script: a queue of :class:`Turn` (``upstream.queue(...)``), else a
``responder`` callable, else the default turn. :func:`tool_then_text` is the responder an agent
CLI needs for one tool round trip: a shell tool call first, then (once the tool's result is in
the request) a final text."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from tests.support.live import serve_in_thread, stop

# ---------------------------------------------------------------------------------------------
# What the upstreams record and what they are scripted with


@dataclass
class Seen:
    """One request as the upstream received it."""

    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-cased names
    raw: bytes
    json: Any  # the parsed body, or None when it is not JSON
    at: float = field(default_factory=time.monotonic)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass
class Block:
    """One piece of a scripted answer, protocol-neutral.

    kind ``text`` (``text``), ``tool`` (``name``, ``input``: a dict, or for a Responses custom tool
    a string), ``thinking`` (``text``, ``signature``; a Responses reasoning item with
    ``encrypted_content`` = ``signature``)."""

    kind: str
    text: str = ""
    name: str = ""
    input: Any = None
    signature: str = ""
    id: str = ""  # the tool call's id; generated when empty


def text(value: str) -> Block:
    return Block("text", text=value)


def tool(name: str, id: str = "", **arguments: Any) -> Block:
    return Block("tool", name=name, input=arguments, id=id)


def custom_tool(name: str, raw_input: str, id: str = "") -> Block:
    """A Responses ``custom_tool_call`` (Codex ``apply_patch``): raw text input."""
    return Block("custom_tool", name=name, input=raw_input, id=id)


def thinking(value: str, signature: str = "") -> Block:
    return Block("thinking", text=value, signature=signature or "sig_" + uuid.uuid4().hex)


@dataclass
class Turn:
    """One scripted answer: content blocks, or an error status with a body."""

    blocks: list[Block] = field(default_factory=lambda: [text("Done.")])
    status: int = 200
    error: dict[str, Any] | None = None  # the JSON body of an error answer
    usage: dict[str, int] = field(default_factory=dict)  # overrides of the default usage
    # Streaming: after the first content event, wait for the upstream's ``release`` event.
    hold: bool = False
    delay_s: float = 0.0


Responder = Callable[["Seen"], Turn]


def _last_user_side(seen: Seen) -> list[Any]:
    """The blocks or items of the request's last user-side turn (either protocol)."""
    body = seen.json if isinstance(seen.json, dict) else {}
    if "messages" in body:
        msgs = body.get("messages") or []
        if not msgs:
            return []
        content = msgs[-1].get("content")
        return content if isinstance(content, list) else [{"type": "text", "text": content}]
    items = body.get("input")
    if isinstance(items, str):
        return [{"type": "input_text", "text": items}]
    tail: list[Any] = []
    for item in reversed(items or []):
        if item.get("role") == "assistant" or item.get("type") in (
            "function_call",
            "custom_tool_call",
            "reasoning",
        ):
            break
        tail.insert(0, item)
    return tail


def has_tool_result(seen: Seen) -> bool:
    """Whether the request's last turn carries a tool's result."""
    return any(
        isinstance(b, dict)
        and b.get("type") in ("tool_result", "function_call_output", "custom_tool_call_output")
        for b in _last_user_side(seen)
    )


def tool_then_text(
    call: Block, final: str, preface: str = "", lead: Sequence[Block] = ()
) -> Responder:
    """Answer with ``lead`` blocks (e.g. a thinking block), the text ``preface`` and ``call``
    (a fresh id each time) unless the request already carries a tool's result, then with the
    text ``final``: one tool round trip per user prompt."""

    def respond(seen: Seen) -> Turn:
        if has_tool_result(seen):
            return Turn([text(final)])
        fresh = Block(call.kind, call.text, call.name, call.input, call.signature)
        return Turn([*lead, *([text(preface)] if preface else []), fresh])

    return respond


class _Scripted:
    """Recording and scripting shared by both upstreams."""

    def __init__(self) -> None:
        self.requests: list[Seen] = []
        # The bytes of each streamed answer as sent (appended to while it streams).
        self.streamed: list[bytearray] = []
        self.turns: deque[Turn] = deque()
        self.responder: Responder | None = None
        self.default = Turn()
        self.release = threading.Event()
        self.url = ""
        self._server: Any = None
        self._ids = itertools.count(1)

    # -- scripting
    def queue(self, *turns: Turn) -> None:
        self.turns.extend(turns)

    def reset(self) -> None:
        self.requests.clear()
        self.streamed.clear()
        self.turns.clear()
        self.responder = None
        self.default = Turn()
        self.release.clear()

    def next_turn(self, seen: Seen) -> Turn:
        if self.turns:
            return self.turns.popleft()
        if self.responder is not None:
            return self.responder(seen)
        return self.default

    # -- what was received
    def posts(self, path: str) -> list[Seen]:
        return [s for s in self.requests if s.method == "POST" and s.path == path]

    @property
    def last(self) -> Seen:
        return self.requests[-1]

    async def _record(self, request: Request) -> Seen:
        raw = await request.body()
        try:
            parsed = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            parsed = None
        seen = Seen(
            request.method,
            request.url.path,
            request.url.query,
            {k.lower(): v for k, v in request.headers.items()},
            raw,
            parsed,
        )
        self.requests.append(seen)
        return seen

    def _id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):04d}{uuid.uuid4().hex[:20]}"

    def _streaming(self, events: AsyncIterator[bytes], headers: dict[str, str]) -> Response:
        sent = bytearray()
        self.streamed.append(sent)

        async def relay() -> AsyncIterator[bytes]:
            async for chunk in events:
                sent.extend(chunk)
                yield chunk

        return StreamingResponse(relay(), media_type="text/event-stream", headers=headers)

    async def _wait_release(self) -> None:
        while not self.release.is_set():
            await asyncio.sleep(0.01)

    # -- lifecycle
    def start(self) -> _Scripted:
        self._server, self.url = serve_in_thread(self.app)  # type: ignore[attr-defined]
        return self

    def stop(self) -> None:
        if self._server is not None:
            stop(self._server)
            self._server = None


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(data), status, headers, media_type="application/json")


def _chunks(value: str, n: int = 3) -> list[str]:
    """``value`` in up to ``n`` pieces (so a stream has several deltas)."""
    if not value:
        return [""]
    size = max(1, -(-len(value) // n))
    return [value[i : i + size] for i in range(0, len(value), size)]


# ---------------------------------------------------------------------------------------------
# Anthropic Messages


ANTHROPIC_USAGE = {
    "input_tokens": 21,
    "output_tokens": 9,
    "cache_read_input_tokens": 13,
    "cache_creation_input_tokens": 4,
}


class AnthropicUpstream(_Scripted):
    """Anthropic's ``/v1/messages`` (base URL: ``upstream.url``, no ``/v1``)."""

    def __init__(self) -> None:
        super().__init__()
        self.app = Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/api/hello", self._hello, methods=["GET", "HEAD"]),
            ]
        )

    @property
    def messages(self) -> list[Seen]:
        return self.posts("/v1/messages")

    async def _hello(self, request: Request) -> Response:
        await self._record(request)
        return Response(b"", 200)

    async def _count_tokens(self, request: Request) -> Response:
        seen = await self._record(request)
        if not isinstance(seen.json, dict) or "messages" not in seen.json:
            return _json(_anthropic_error(400, "messages: Field required"), 400)
        return _json({"input_tokens": max(1, len(seen.raw) // 4)})

    async def _messages(self, request: Request) -> Response:
        seen = await self._record(request)
        body = seen.json
        if not isinstance(body, dict) or "messages" not in body or "model" not in body:
            return _json(_anthropic_error(400, "model and messages are required"), 400)
        turn = self.next_turn(seen)
        if turn.delay_s:
            await asyncio.sleep(turn.delay_s)
        if turn.status >= 400:
            err = turn.error or _anthropic_error(turn.status, "scripted failure")
            return _json(err, turn.status, {"request-id": "req_fake"})
        message = self._message(body, turn)
        headers = {"request-id": self._id("req_")}
        if body.get("stream"):
            return self._streaming(self._stream(message, turn), headers)
        return _json(message, headers=headers)

    def _message(self, body: dict[str, Any], turn: Turn) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for b in turn.blocks:
            if b.kind == "text":
                content.append({"type": "text", "text": b.text})
            elif b.kind == "thinking":
                content.append({"type": "thinking", "thinking": b.text, "signature": b.signature})
            elif b.kind in ("tool", "custom_tool"):
                content.append(
                    {
                        "type": "tool_use",
                        "id": b.id or self._id("toolu_"),
                        "name": b.name,
                        "input": b.input if isinstance(b.input, dict) else {"input": b.input},
                    }
                )
        stop_reason = "tool_use" if any(c["type"] == "tool_use" for c in content) else "end_turn"
        return {
            "id": self._id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {**ANTHROPIC_USAGE, **turn.usage},
        }

    async def _stream(self, message: dict[str, Any], turn: Turn) -> AsyncIterator[bytes]:
        usage = message["usage"]
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {**usage, "output_tokens": 1},
        }
        yield _sse("message_start", {"type": "message_start", "message": start})
        yield _sse("ping", {"type": "ping"})
        for index, block in enumerate(message["content"]):
            kind = block["type"]
            if kind == "text":
                first = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": p} for p in _chunks(block["text"])]
            elif kind == "thinking":
                first = {"type": "thinking", "thinking": "", "signature": ""}
                deltas = [
                    {"type": "thinking_delta", "thinking": p} for p in _chunks(block["thinking"])
                ]
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
            else:
                first = {**block, "input": {}}
                args = orjson.dumps(block["input"]).decode()
                deltas = [{"type": "input_json_delta", "partial_json": p} for p in _chunks(args)]
            yield _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": first},
            )
            for delta in deltas:
                yield _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
                if turn.hold:
                    turn = Turn(turn.blocks, hold=False)
                    await self._wait_release()
            yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        yield _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": usage,
            },
        )
        yield _sse("message_stop", {"type": "message_stop"})


def _anthropic_error(status: int, message: str) -> dict[str, Any]:
    kinds = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    return {"type": "error", "error": {"type": kinds.get(status, "api_error"), "message": message}}


# ---------------------------------------------------------------------------------------------
# OpenAI Responses


RESPONSES_USAGE = {
    "input_tokens": 31,
    "input_tokens_details": {"cached_tokens": 17},
    "output_tokens": 8,
    "output_tokens_details": {"reasoning_tokens": 2},
    "total_tokens": 39,
}


class ResponsesUpstream(_Scripted):
    """The Responses API at ``upstream.base_url`` (``…/v1``).

    ``ws_status`` is how ``GET /v1/responses`` with a websocket upgrade is answered: ``None``
    refuses it the way Starlette refuses any websocket it has no route for (HTTP 403); a status
    code refuses it with that status (``ws_body``, ``ws_headers``); ``101`` accepts it and closes
    at once (this fake does not speak the websocket protocol)."""

    def __init__(self) -> None:
        super().__init__()
        self.ws_status: int | None = 426
        self.ws_body: bytes = b""
        self.ws_headers: dict[str, str] = {}
        self.ws_attempts: list[Seen] = []
        self.app = Starlette(
            routes=[
                Route("/v1/responses", self._responses, methods=["POST"]),
                Route("/v1/responses", self._plain_get, methods=["GET"]),
                WebSocketRoute("/v1/responses", self._websocket),
            ]
        )

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    @property
    def responses(self) -> list[Seen]:
        return self.posts("/v1/responses")

    def reset(self) -> None:
        super().reset()
        self.ws_attempts.clear()

    async def _plain_get(self, request: Request) -> Response:
        await self._record(request)
        return _json(_openai_error("Method not allowed", "invalid_request_error"), 405)

    async def _websocket(self, websocket: WebSocket) -> None:
        seen = Seen(
            "WS",
            websocket.url.path,
            websocket.url.query,
            {k.lower(): v for k, v in websocket.headers.items()},
            b"",
            None,
        )
        self.ws_attempts.append(seen)
        self.requests.append(seen)
        if self.ws_status is None:
            await websocket.close()  # Starlette's answer for a route it does not serve: 403
            return
        if self.ws_status == 101:
            await websocket.accept()
            await websocket.close(1011)
            return
        await websocket.send_denial_response(
            Response(self.ws_body, self.ws_status, self.ws_headers or None)
        )

    async def _responses(self, request: Request) -> Response:
        seen = await self._record(request)
        body = seen.json
        if not isinstance(body, dict) or "model" not in body:
            return _json(_openai_error("model is required", "invalid_request_error"), 400)
        turn = self.next_turn(seen)
        if turn.delay_s:
            await asyncio.sleep(turn.delay_s)
        if turn.status >= 400:
            err = turn.error or _openai_error("scripted failure", "server_error")
            return _json(err, turn.status)
        response = self._response(body, turn)
        if body.get("stream"):
            return self._streaming(self._stream(response, turn), {"x-request-id": self._id("req_")})
        return _json(response, headers={"x-request-id": self._id("req_")})

    def _response(self, body: dict[str, Any], turn: Turn) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        for b in turn.blocks:
            if b.kind == "text":
                output.append(
                    {
                        "id": self._id("msg_"),
                        "type": "message",
                        "status": "completed",
                        "role": "assistant",
                        "content": [
                            {
                                "type": "output_text",
                                "text": b.text,
                                "annotations": [],
                                "logprobs": [],
                            }
                        ],
                    }
                )
            elif b.kind == "thinking":
                output.append(
                    {
                        "id": self._id("rs_"),
                        "type": "reasoning",
                        "summary": [{"type": "summary_text", "text": b.text}],
                        "content": None,
                        "encrypted_content": b.signature,
                    }
                )
            elif b.kind == "tool":
                output.append(
                    {
                        "id": self._id("fc_"),
                        "type": "function_call",
                        "status": "completed",
                        "name": b.name,
                        "arguments": orjson.dumps(b.input).decode(),
                        "call_id": b.id or self._id("call_"),
                    }
                )
            elif b.kind == "custom_tool":
                output.append(
                    {
                        "id": self._id("ctc_"),
                        "type": "custom_tool_call",
                        "status": "completed",
                        "name": b.name,
                        "input": b.input,
                        "call_id": b.id or self._id("call_"),
                    }
                )
        return {
            "id": self._id("resp_"),
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "model": body.get("model"),
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
            "store": body.get("store", False),
            "temperature": 1.0,
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "top_p": 1.0,
            "truncation": "disabled",
            "metadata": {},
            "usage": {**RESPONSES_USAGE, **turn.usage},
        }

    async def _stream(self, response: dict[str, Any], turn: Turn) -> AsyncIterator[bytes]:
        seq = itertools.count()

        def ev(kind: str, **data: Any) -> bytes:
            return _sse(kind, {"type": kind, "sequence_number": next(seq), **data})

        pending = {**response, "status": "in_progress", "output": [], "usage": None}
        yield ev("response.created", response=pending)
        yield ev("response.in_progress", response=pending)
        held = turn.hold
        for index, item in enumerate(response["output"]):
            kind, item_id = item["type"], item["id"]
            if kind == "message":
                added = {**item, "status": "in_progress", "content": []}
                yield ev("response.output_item.added", output_index=index, item=added)
                full = item["content"][0]["text"]
                where = {"item_id": item_id, "output_index": index, "content_index": 0}
                yield ev(
                    "response.content_part.added",
                    **where,
                    part={"type": "output_text", "text": "", "annotations": [], "logprobs": []},
                )
                for piece in _chunks(full):
                    yield ev("response.output_text.delta", **where, delta=piece, logprobs=[])
                    if held:
                        held = False
                        await self._wait_release()
                yield ev("response.output_text.done", **where, text=full, logprobs=[])
                yield ev("response.content_part.done", **where, part=item["content"][0])
            elif kind == "reasoning":
                added = {**item, "summary": []}
                yield ev("response.output_item.added", output_index=index, item=added)
                summary = item["summary"][0]["text"]
                where = {"item_id": item_id, "output_index": index, "summary_index": 0}
                yield ev(
                    "response.reasoning_summary_part.added",
                    **where,
                    part={"type": "summary_text", "text": ""},
                )
                for piece in _chunks(summary):
                    yield ev("response.reasoning_summary_text.delta", **where, delta=piece)
                yield ev("response.reasoning_summary_text.done", **where, text=summary)
                yield ev(
                    "response.reasoning_summary_part.done",
                    **where,
                    part={"type": "summary_text", "text": summary},
                )
            elif kind == "function_call":
                added = {**item, "status": "in_progress", "arguments": ""}
                yield ev("response.output_item.added", output_index=index, item=added)
                where = {"item_id": item_id, "output_index": index}
                for piece in _chunks(item["arguments"]):
                    yield ev("response.function_call_arguments.delta", **where, delta=piece)
                    if held:
                        held = False
                        await self._wait_release()
                yield ev(
                    "response.function_call_arguments.done", **where, arguments=item["arguments"]
                )
            elif kind == "custom_tool_call":
                added = {**item, "status": "in_progress", "input": ""}
                yield ev("response.output_item.added", output_index=index, item=added)
                where = {"item_id": item_id, "output_index": index}
                for piece in _chunks(item["input"]):
                    yield ev("response.custom_tool_call_input.delta", **where, delta=piece)
                yield ev("response.custom_tool_call_input.done", **where, input=item["input"])
            yield ev("response.output_item.done", output_index=index, item=item)
        yield ev("response.completed", response=response)


def _openai_error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


# ---------------------------------------------------------------------------------------------


def start_anthropic_upstream() -> AnthropicUpstream:
    up = AnthropicUpstream()
    up.start()
    return up


def start_responses_upstream() -> ResponsesUpstream:
    up = ResponsesUpstream()
    up.start()
    return up
