"""One place parses and validates a Chat Completions body: JSON (orjson), an object, nested at
most ``MAX_JSON_DEPTH`` deep, a model name and messages of the right shapes. Every problem is a
``BadRequest`` naming the field, with any client text it quotes clipped."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from proxy.errors import BadRequest
from proxy.protocols.base import TAG
from proxy.protocols.exact_json import LossyNumber, exact_loads, exact_within_depth
from rules.messages import (
    ABSORBED,
    HELD,
    LOADS_TOOLS,
    MEDIA,
    MEDIA_TOKENS,
    OPAQUE_PAIRS,
    ORPHANS,
)
from rules.redact import redact_text

MAX_JSON_DEPTH = 200  # below orjson's serialisation limit of 255, with room for wrapping
VALID_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
MAX_MODEL_CHARS = 256  # longer than any provider's model name; bounds what errors and logs echo
ECHO_CHARS = 40  # client text quoted back in an error is clipped to this
# The proxy's own marks on the messages the rules read: set by a protocol adapter, never sent by
# a client, whose chat messages the rules read as they are
RESERVED_KEYS = (TAG, HELD, MEDIA, MEDIA_TOKENS, ABSORBED, ORPHANS, LOADS_TOOLS, OPAQUE_PAIRS)


def echo(value: Any) -> str:
    """``repr(value)``, redacted and clipped: an error never echoes a secret or unbounded client
    text (redacted before the cut, which could leave a secret unrecognisable)."""
    text = redact_text(repr(value)[: ECHO_CHARS + 2_000])
    return text if len(text) <= ECHO_CHARS else text[: ECHO_CHARS - 1] + "…"


def echo_id(value: str, limit: int = 80) -> str:
    """An id the client sent, as an error quotes it: redacted, then clipped."""
    text = redact_text(value[: limit + 2_000])
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_json(raw: bytes) -> dict[str, Any]:
    """The request body as a dict (any protocol's), or BadRequest: JSON, an object, nested at most
    ``MAX_JSON_DEPTH`` deep. Its size was checked as it was read (the server's reader, or
    ``ctxproxy rewrite``'s)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"Request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise BadRequest("Request body must be a JSON object.", code="invalid_json")
    try:  # walks containers only: cheaper than counting brackets in the bytes
        shallow = exact_within_depth(body, MAX_JSON_DEPTH - 1)
    except LossyNumber:  # an integer past 64 bits: parsed again, kept exactly (rare)
        check_depth(body)  # first: the standard library's parser recurses
        return exact_loads(raw)  # type: ignore[no-any-return]
    if not shallow:
        check_depth(body)
    return body


def check_depth(body: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """400 for a body nested deeper than ``limit`` arrays/objects: orjson parses up to 1024
    levels but serialises only 254, so such a body would fail later (forwarding, the log)."""
    if not within_depth(body, limit - 1):
        raise BadRequest(
            f"Request body is nested more than {limit} levels deep (arrays/objects); "
            f"the limit is {limit}.",
            code="invalid_json",
        )


def within_depth(value: dict[str, Any] | list[Any], remaining: int) -> bool:
    """Whether no container inside ``value`` is nested more than ``remaining`` levels below it."""
    # recursion, not an explicit stack: ~3× faster here, and ``remaining`` bounds it at ``limit``
    children: Iterable[Any] = value.values() if type(value) is dict else value
    for child in children:
        kind = type(child)
        if (kind is dict or kind is list) and (
            remaining <= 0 or not within_depth(child, remaining - 1)
        ):
            return False
    return True


# Flags the proxy acts on itself (a stream relayed as one, a background response): a string or a
# number there read one way here and another upstream ("false" is truthy; a pydantic server takes
# it for False), so each is a boolean, as the providers require, or null
_FLAGS = ("stream", "background")


def validate_model(body: Mapping[str, Any]) -> None:
    """'model': a non-empty string of at most ``MAX_MODEL_CHARS``; 'stream' and 'background',
    when given, booleans (every protocol's)."""
    for flag in _FLAGS:
        value = body.get(flag)
        if value is not None and not isinstance(value, bool):
            raise BadRequest(f"'{flag}' must be a boolean; got {echo(value)}.", param=flag)
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise BadRequest("'model' is required and must be a non-empty string.", param="model")
    if len(model) > MAX_MODEL_CHARS:
        raise BadRequest(
            f"'model' is {len(model)} characters long; the limit is {MAX_MODEL_CHARS}.",
            param="model",
        )


def validate_body(body: Mapping[str, Any], start: int = 0) -> None:
    """``start``: the messages before it were validated at the same index before (a reused
    prefix, ``body_memory``)."""
    validate_model(body)
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise BadRequest("'messages' is required and must be an array.", param="messages")
    if not messages:
        raise BadRequest("'messages' must contain at least one message.", param="messages")
    for i in range(start, len(messages)):
        m = messages[i]
        if not isinstance(m, dict):
            raise BadRequest(f"'messages[{i}]' must be an object.", param=f"messages[{i}]")
        r = m.get("role")
        if not isinstance(r, str) or r not in VALID_ROLES:
            raise BadRequest(
                f"'messages[{i}].role' must be one of {sorted(VALID_ROLES)}; got {echo(r)}.",
                param=f"messages[{i}].role",
            )
        for key in RESERVED_KEYS:
            if key in m:
                raise BadRequest(
                    f"'messages[{i}].{key}' is a name the proxy keeps for itself.",
                    param=f"messages[{i}].{key}",
                )
        content = m.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise BadRequest(
                f"'messages[{i}].content' must be a string, an array of parts or null.",
                param=f"messages[{i}].content",
            )
        if (
            "tool_calls" in m
            and m["tool_calls"] is not None
            and not isinstance(m["tool_calls"], list)
        ):
            raise BadRequest(
                f"'messages[{i}].tool_calls' must be an array.", param=f"messages[{i}].tool_calls"
            )
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("'tools' must be an array.", param="tools")
