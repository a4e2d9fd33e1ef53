"""A scripted Gemini API upstream on 127.0.0.1 (uvicorn in a thread, like
``tests/support/protocol_upstreams.py``), written from the wire notes in
``../shared/agents/gemini.md``.

Serves ``POST /v1beta/models/{model}:generateContent``, ``:streamGenerateContent`` (SSE with
``alt=sse``, Google's JSON-array stream without) and ``:countTokens``; records every request
(``Seen``) and answers from a script (``Turn``s, a ``responder``, or the default turn). It holds
requests to the rules the real API enforces and answers their breaks as it does:

- a key in ``x-goog-api-key`` (else 403 ``PERMISSION_DENIED``);
- the pairing rule: a ``model`` turn with N ``functionCall`` parts is followed by a ``user`` turn
  with N ``functionResponse`` parts, names matching in order (else 400 ``INVALID_ARGUMENT``,
  "Please ensure that the number of function response parts is equal to the number of function
  call parts of the function call turn.");
- an input over ``max_input_tokens`` (4 bytes a token): 400 "The input token count (N) exceeds
  the maximum number of tokens allowed (M).";
- with ``require_signatures`` (Gemini 3's rule, ai.google.dev/gemini-api/docs/thought-signatures):
  in the current turn (the contents after the last ``user`` content holding text), the first
  ``functionCall`` part of each ``model`` content carries a ``thoughtSignature`` (else 400
  ``INVALID_ARGUMENT``, "Function call is missing a thought_signature in functionCall parts.").

``array_pace_s``: the JSON-array stream sends one element per block of the turn, this many
seconds apart, and notes when its last byte went (``array_done``, ``time.monotonic()``).

Gemini CLI's routing classifier (a ``generateContent`` with ``responseMimeType:
application/json``) is answered with a score of 1, so the main loop uses the flash model."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.support.protocol_upstreams import Block, Seen, Turn, _Scripted, text

PAIRING_MESSAGE = (
    "Please ensure that the number of function response parts is equal to the number of "
    "function call parts of the function call turn."
)
GEMINI_USAGE = {"promptTokenCount": 40, "candidatesTokenCount": 7, "cachedContentTokenCount": 24}


def gemini_error(status: int, message: str, kind: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": kind}}


def pairing_break(contents: Any) -> str | None:
    """Why the real API would refuse ``contents`` under the pairing rule (None: it would not)."""
    pending: list[str] = []
    for content in contents if isinstance(contents, list) else []:
        parts = (content.get("parts") or []) if isinstance(content, dict) else []
        calls = [p["functionCall"].get("name") for p in parts if "functionCall" in p]
        answers = [p["functionResponse"].get("name") for p in parts if "functionResponse" in p]
        if pending and answers != pending:
            return PAIRING_MESSAGE
        if answers and not pending:
            return PAIRING_MESSAGE
        pending = calls if isinstance(content, dict) and content.get("role") == "model" else []
    return None


SIGNATURE_MESSAGE = (
    "Function call is missing a thought_signature in functionCall parts. This is required for "
    "tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance."
)


def signature_break(contents: Any) -> str | None:
    """Why Gemini 3 would refuse ``contents`` for a missing thought signature (None: it would
    not): the current turn starts after the last ``user`` content holding text (a content of
    function responses only is a step of the turn), and each of its ``model`` contents' first
    ``functionCall`` part must carry its ``thoughtSignature``."""
    items = [c for c in contents if isinstance(c, dict)] if isinstance(contents, list) else []
    start = 0
    for i, content in enumerate(items):
        parts = content.get("parts") or []
        if content.get("role") != "model" and any("text" in p for p in parts):
            start = i + 1
    for content in items[start:]:
        calls = [p for p in content.get("parts") or [] if "functionCall" in p]
        if content.get("role") == "model" and calls and "thoughtSignature" not in calls[0]:
            return SIGNATURE_MESSAGE
    return None


def last_has_response(seen: Seen) -> bool:
    contents = (seen.json or {}).get("contents") or []
    return bool(contents) and any("functionResponse" in p for p in contents[-1].get("parts", []))


def shell_then_text(command: Callable[[Seen], str], final: str) -> Callable[[Seen], Turn]:
    """A ``run_shell_command`` call (no id: the CLI mints one) unless the request's last turn
    carries its response, then the text ``final``: one tool round trip per prompt."""

    def respond(seen: Seen) -> Turn:
        if last_has_response(seen):
            return Turn([text(final)])
        cmd = command(seen)
        call = Block("tool", name="run_shell_command", input={"command": cmd, "description": cmd})
        return Turn([text("I'll run it."), call])

    return respond


class GeminiUpstream(_Scripted):
    """Google's Gemini API (base URL: ``upstream.url``, paths carry ``/v1beta``)."""

    def __init__(self) -> None:
        super().__init__()
        self.max_input_tokens = 1_000_000
        self.require_signatures = False
        self.signatures = itertools.count(1)
        self.array_pace_s = 0.0
        self.array_done: list[float] = []
        self.array_sent: list[bytearray] = []
        self.app = Starlette(
            routes=[Route("/v1beta/models/{target}", self._model, methods=["POST"])]
        )

    def main_calls(self) -> list[Seen]:
        """The agent loop's requests (not the routing classifier's)."""
        return [s for s in self.requests if s.path.endswith(":streamGenerateContent")]

    def classifier_calls(self) -> list[Seen]:
        return [s for s in self.requests if s.path.endswith(":generateContent")]

    async def _model(self, request: Request) -> Response:
        seen = await self._record(request)
        model, _, method = request.path_params["target"].partition(":")
        if not request.headers.get("x-goog-api-key"):
            return _json(gemini_error(403, "Method doesn't allow unregistered callers.",
                                      "PERMISSION_DENIED"), 403)  # fmt: skip
        body = seen.json
        if not isinstance(body, dict) or not isinstance(body.get("contents"), list):
            return _json(gemini_error(400, "contents is required", "INVALID_ARGUMENT"), 400)
        if method == "countTokens":
            return _json({"totalTokens": max(1, len(seen.raw) // 4)})
        broken = pairing_break(body["contents"])
        if broken is None and self.require_signatures:
            broken = signature_break(body["contents"])
        if broken is not None:
            return _json(gemini_error(400, broken, "INVALID_ARGUMENT"), 400)
        tokens = len(seen.raw) // 4
        if tokens > self.max_input_tokens:
            message = (
                f"The input token count ({tokens}) exceeds the maximum number of tokens "
                f"allowed ({self.max_input_tokens})."
            )
            return _json(gemini_error(400, message, "INVALID_ARGUMENT"), 400)
        config = body.get("generationConfig") or {}
        if method == "generateContent" and config.get("responseMimeType") == "application/json":
            answer = '{"complexity_reasoning": "a simple request", "complexity_score": 1}'
            return _json(self._chunk([text(answer)], model, usage=True))
        turn = self.next_turn(seen)
        if turn.status >= 400:
            err = turn.error or gemini_error(turn.status, "scripted failure", "INTERNAL")
            return _json(err, turn.status)
        chunks = [self._chunk(turn.blocks, model, usage=True, extra=turn.usage)]
        if method == "generateContent":
            return _json(chunks[0])
        if request.query_params.get("alt") == "sse":
            return self._streaming(_sse(chunks), {})
        if self.array_pace_s:
            return self._paced_array(turn.blocks, model, turn.usage)
        return _json(chunks)

    def _paced_array(
        self, blocks: list[Block], model: str, usage: dict[str, int] | None
    ) -> Response:
        """The JSON-array stream written slowly: one element per block, the usage on the last."""
        elements = [
            self._chunk([b], model, usage=i == len(blocks) - 1, extra=usage)
            for i, b in enumerate(blocks)
        ]
        pace, sent = self.array_pace_s, bytearray()
        self.array_sent.append(sent)

        async def paced() -> AsyncIterator[bytes]:
            for i, element in enumerate(elements):
                if i:
                    await asyncio.sleep(pace)
                piece = (b"[" if i == 0 else b",\r\n") + orjson.dumps(element)
                sent.extend(piece)
                yield piece
            await asyncio.sleep(pace)
            sent.extend(b"\r\n]")
            yield b"\r\n]"
            self.array_done.append(time.monotonic())

        return StreamingResponse(paced(), media_type="application/json")

    def _chunk(
        self, blocks: list[Block], model: str, usage: bool, extra: dict[str, int] | None = None
    ) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        for b in blocks:
            if b.kind == "text":
                parts.append({"text": b.text})
            elif b.kind == "thinking":
                parts.append({"text": b.text, "thought": True})
            elif b.kind == "tool":
                call: dict[str, Any] = {"name": b.name, "args": b.input or {}}
                if b.id:
                    call["id"] = b.id
                sig = f"CiQBfakeSig{next(self.signatures):04d}=="
                parts.append({"functionCall": call, "thoughtSignature": sig})
        chunk: dict[str, Any] = {
            "candidates": [
                {"content": {"parts": parts, "role": "model"}, "finishReason": "STOP", "index": 0}
            ],
            "modelVersion": model,
            "responseId": self._id("resp_"),
        }
        if usage:
            chunk["usageMetadata"] = {**GEMINI_USAGE, **(extra or {})}
        return chunk


async def _sse(chunks: list[dict[str, Any]]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield b"data: " + orjson.dumps(chunk) + b"\r\n\r\n"


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status, media_type="application/json")


def start_gemini_upstream() -> GeminiUpstream:
    up = GeminiUpstream()
    up.start()
    return up
