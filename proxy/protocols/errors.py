"""Each protocol's error shape. Chat Completions and the Responses API answer in OpenAI's
(``{"error": {message, type, param, code}}``, ``ProxyError.body``); Anthropic Messages in
Anthropic's: ``{"type": "error", "error": {"type", "message"}}`` with its type for the status.
In a stream, an error is an event: Anthropic's ``event: error``, the Responses API's ``error``
event, Chat Completions' ``data:`` line."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.errors import ProxyError

# Anthropic's error types by HTTP status (docs.anthropic.com, "Errors").
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    499: "invalid_request_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_type(status: int) -> str:
    return _ANTHROPIC_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


def anthropic_error(status: int, message: str) -> bytes:
    body = {"type": "error", "error": {"type": anthropic_type(status), "message": message}}
    return orjson.dumps(body)


def anthropic_body(error: ProxyError) -> bytes:
    return anthropic_error(error.status, error.message)


def openai_body(error: ProxyError) -> bytes:
    return error.body_bytes()


_SEQUENCE = b'"sequence_number":'


def chat_stream_error(error: ProxyError, before: bytes = b"") -> bytes:
    return b"data: " + error.body_bytes() + b"\n\n"


def anthropic_stream_error(error: ProxyError, before: bytes = b"") -> bytes:
    return b"event: error\ndata: " + anthropic_body(error) + b"\n\n"


def responses_stream_error(error: ProxyError, before: bytes = b"") -> bytes:
    """The Responses API's ``error`` event, numbered after the last event relayed (``before``,
    the stream's last piece sent): every event of that stream carries its ``sequence_number``."""
    event: dict[str, Any] = {
        "type": "error",
        "code": error.code,
        "message": error.message,
        "param": error.param,
        "sequence_number": _next_sequence(before),
    }
    return b"event: error\ndata: " + orjson.dumps(event) + b"\n\n"


def _next_sequence(before: bytes) -> int:
    """One past the last ``"sequence_number":N`` in ``before`` (a key: a string's quotes are
    escaped), 0 if there is none."""
    at = before.rfind(_SEQUENCE)
    if at < 0:
        return 0
    digits = before[at + len(_SEQUENCE) : at + len(_SEQUENCE) + 24].lstrip(b" ")
    end = next((i for i, c in enumerate(digits) if not 48 <= c <= 57), len(digits))
    return int(digits[:end]) + 1 if end else 0


def reshaped_as_openai(status: int, body: bytes) -> bytes:
    """An error body that is not JSON (a gateway's HTML page, plain text) in OpenAI's shape, its
    text inside; JSON goes as it came, whatever its shape (a provider's own, Gemini's list, a
    server's top-level ``code``, which the overflow rescue reads)."""
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:
        message = _text_of(status, body, "an OpenAI-compatible server's usually ends in /v1")
        return orjson.dumps({"error": _openai_error(status, message)})
    return body


def _openai_error(status: int, message: str) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "upstream_error"
    return {"message": message, "type": kind, "param": None, "code": None}


def _text_of(status: int, body: bytes, base_url_hint: str) -> str:
    """What a body that is not JSON says; for a 404, that the path is likely wrong: an API that
    knows a path answers its errors in JSON (a bare "404 page not found" is a server with no
    such route, mostly a ``base_url`` missing or doubling a version segment)."""
    text = body[:2000].decode("utf-8", "replace").strip() or "(no body)"
    if status != 404:
        return text
    return (
        f"{text} [the upstream has no such path: is the upstream's base_url right? "
        f"{base_url_hint}]"
    )


def reshaped_as_anthropic(status: int, body: bytes) -> bytes:
    """An OpenAI-shaped error body (litellm's path, our own) in Anthropic's shape; a body
    already in Anthropic's shape is kept."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        hint = "Anthropic's is the host, without /v1 (https://api.anthropic.com)"
        return anthropic_error(status, _text_of(status, body, hint))
    if isinstance(value, dict) and value.get("type") == "error":
        return body
    return anthropic_error(status, _message_of(value))


def _message_of(value: object) -> str:
    """What an error body in another shape says: ``error.message`` (OpenAI's, litellm's), an
    ``error`` or ``detail`` or ``message`` that is text (FastAPI's and other gateways')."""
    if isinstance(value, dict):
        error = value.get("error")
        for said in (error.get("message") if isinstance(error, dict) else None, error,
                     value.get("detail"), value.get("message")):  # fmt: skip
            if isinstance(said, str) and said.strip():
                return said[:2000]
    return "Upstream error."


# Google's canonical error codes by HTTP status (cloud.google.com/apis/design/errors).
_GEMINI_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    415: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def gemini_status(status: int) -> str:
    return _GEMINI_STATUSES.get(status, "FAILED_PRECONDITION" if status < 500 else "INTERNAL")


def gemini_error(status: int, message: str) -> bytes:
    body = {"error": {"code": status, "message": message, "status": gemini_status(status)}}
    return orjson.dumps(body)


def gemini_body(error: ProxyError) -> bytes:
    return gemini_error(error.status, error.message)


def gemini_stream_error(error: ProxyError, before: bytes = b"") -> bytes:
    """An error inside an SSE answer (``alt=sse``): one more ``data:`` event, as Google's own."""
    return b"data: " + gemini_body(error) + b"\n\n"


def reshaped_as_gemini(status: int, body: bytes) -> bytes:
    """An error body in another shape (litellm's path, OpenAI's, Anthropic's) in Gemini's; one
    already in Gemini's shape is kept, as is its message: alone, or as the one element of the
    array Google answers a JSON-array stream's request with (its ``details`` too: a 429's
    ``RetryInfo``, a key's ``ErrorInfo``)."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        hint = "Gemini's is the host (https://generativelanguage.googleapis.com)"
        return gemini_error(status, _text_of(status, body, hint))
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    error = value.get("error") if isinstance(value, dict) else None
    if isinstance(error, dict) and isinstance(error.get("status"), str) and "code" in error:
        return body
    return gemini_error(status, _message_of(value))
