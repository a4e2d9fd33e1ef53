"""Tells an upstream's "the prompt is too long" answer from its other errors, and reads the window
and token counts it states, in each provider's wording:

- OpenAI (and vLLM): 400, ``error.code`` ``context_length_exceeded``, "This model's maximum
  context length is 128000 tokens. However, your messages resulted in 130000 tokens." or "…you
  requested 5000 tokens (4000 in the messages, 1000 in the completion)."
- Anthropic: 400 ``invalid_request_error``, "prompt is too long: 210000 tokens > 200000 maximum",
  or "input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000".
- Gemini: "The input token count (1200000) exceeds the maximum number of tokens allowed
  (1048576)."
- litellm's ``ContextWindowExceededError`` (our litellm upstream relays its class as the code).

The body is untrusted: only a bounded head of it is read, with linear patterns."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

MAX_BODY = 64 * 1024  # a larger error body is no overflow answer
MAX_TEXT = 2000  # characters of the message searched
_CODES = frozenset({"context_length_exceeded", "ContextWindowExceededError"})
_PHRASES = (
    "maximum context length",
    "prompt is too long",
    "context_length_exceeded",
    "context length exceeded",
    "exceed context limit",
    "exceeds the context window",
    "exceeds the maximum number of tokens",
)
_N = r"(\d{1,10})"
# (pattern, what each group is): w window, p prompt, c completion
_PATTERNS = (
    (re.compile(rf"maximum context length is {_N} tokens"), "w"),
    (re.compile(rf"resulted in {_N} tokens"), "p"),
    (re.compile(rf"requested {_N} tokens \({_N} in the messages, {_N} in the completion\)"), "-pc"),
    (re.compile(rf"request has {_N} input tokens"), "p"),
    (re.compile(rf"prompt is too long: {_N} tokens > {_N} maximum"), "pw"),
    (re.compile(rf"exceed context limit: {_N} \+ {_N} > {_N}"), "pcw"),
    (re.compile(rf"input token count \({_N}\) exceeds the maximum number of tokens allowed"), "p"),
    (re.compile(rf"maximum number of tokens allowed \({_N}\)"), "w"),
)
_MIN_WINDOW = 256
_MAX_WINDOW = 10**8


@dataclass(frozen=True)
class Overflow:
    """What an overflow answer states; None where it says nothing (or nothing believable)."""

    window: int | None  # the model's maximum, prompt and completion together
    prompt_tokens: int | None  # the prompt as the upstream counted it
    completion_tokens: int | None  # the completion it counted against the window


def overflow_of(status: int, body: bytes | None) -> Overflow | None:
    """The overflow an error answer reports, or None when it is some other answer."""
    if status not in (400, 413) or not body or len(body) > MAX_BODY:
        return None
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    code, message = _error_of(data)
    text = message[:MAX_TEXT]
    lowered = text.lower()
    if code not in _CODES and not any(p in lowered for p in _PHRASES):
        return None
    found: dict[str, int] = {}
    for pattern, roles in _PATTERNS:
        match = pattern.search(lowered)
        if match is None:
            continue
        for role, value in zip(roles, match.groups(), strict=True):
            if role != "-":
                found.setdefault(role, int(value))
    window = found.get("w")
    if window is not None and not _MIN_WINDOW <= window <= _MAX_WINDOW:
        window = None
    return Overflow(window, _sane(found.get("p")), _sane(found.get("c")))


def _sane(value: int | None) -> int | None:
    return value if value is not None and 0 < value <= _MAX_WINDOW * 10 else None


def _error_of(data: Any) -> tuple[str, str]:
    """(code, message) of an error body: OpenAI's and Anthropic's ``{"error": {...}}``, a bare
    ``{"error": "text"}``, or a top-level ``message``."""
    if not isinstance(data, dict):
        return "", ""
    error = data.get("error")
    if isinstance(error, str):
        return "", error
    holder = error if isinstance(error, dict) else data
    code = holder.get("code")
    message = holder.get("message")
    return (code if isinstance(code, str) else "", message if isinstance(message, str) else "")
