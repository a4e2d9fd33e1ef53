"""Body validation for Anthropic Messages and the Responses API: the shapes the adapters rely
on, each problem a ``BadRequest`` naming the field. What the provider validates itself (max_tokens,
a block's own fields) is left to it: the adapters read defensively."""

from __future__ import annotations

from typing import Any

from proxy.errors import BadRequest
from proxy.protocols.body import echo, validate_model

ANTHROPIC_ROLES = frozenset({"user", "assistant", "system"})


def _blocks(value: Any, where: str, nested: bool = False) -> None:
    if isinstance(value, str):
        return
    if not isinstance(value, list):
        raise BadRequest(f"'{where}' must be a string or an array of blocks.", param=where)
    for j, block in enumerate(value):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise BadRequest(
                f"'{where}[{j}]' must be an object with a string 'type'.", param=f"{where}[{j}]"
            )
        if block["type"] == "text" and not isinstance(block.get("text"), str):
            raise BadRequest(f"'{where}[{j}].text' must be a string.", param=f"{where}[{j}].text")
        # a tool result's own blocks are read as a message's are (one level: none nests deeper)
        if block["type"] == "tool_result" and not nested and block.get("content") is not None:
            _blocks(block["content"], f"{where}[{j}].content", nested=True)


def _valid_blocks(value: Any, nested: bool = False) -> bool:
    """What ``_blocks`` checks, without naming where (run on every message of every request;
    ``_blocks`` runs only to word the error)."""
    if isinstance(value, str):
        return True
    if not isinstance(value, list):
        return False
    for block in value:
        if not isinstance(block, dict):
            return False
        kind = block.get("type")
        if not isinstance(kind, str) or (kind == "text" and not isinstance(block.get("text"), str)):
            return False
        if kind == "tool_result" and not nested:
            inner = block.get("content")
            if inner is not None and not _valid_blocks(inner, nested=True):
                return False
    return True


def validate_anthropic(body: dict[str, Any], start: int = 0) -> None:
    """``start``: the messages before it were validated at the same index before (a reused
    prefix, ``body_memory``)."""
    validate_model(body)
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise BadRequest("'messages' is required and must be an array.", param="messages")
    if not messages:  # Anthropic refuses it too: said here, before a session or an upstream
        raise BadRequest("'messages' must contain at least one message.", param="messages")
    for i in range(start, len(messages)):
        m = messages[i]
        if not isinstance(m, dict):
            raise BadRequest(f"'messages[{i}]' must be an object.", param=f"messages[{i}]")
        r = m.get("role")
        if not isinstance(r, str) or r not in ANTHROPIC_ROLES:  # a list or object: unhashable
            raise BadRequest(
                f"'messages[{i}].role' must be one of {sorted(ANTHROPIC_ROLES)}; got {echo(r)}.",
                param=f"messages[{i}].role",
            )
        content = m.get("content")
        if not _valid_blocks(content):
            _blocks(content, f"messages[{i}].content")
    system = body.get("system")
    if system is not None:
        _blocks(system, "system")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("'tools' must be an array.", param="tools")


def validate_count_tokens(body: dict[str, Any]) -> None:
    validate_anthropic(body)


def validate_responses(body: dict[str, Any], start: int = 0) -> None:
    """``start``: the items before it were validated at the same index before (a reused prefix,
    ``body_memory``)."""
    validate_model(body)
    inp = body.get("input")
    if inp is not None and not isinstance(inp, (str, list)):
        raise BadRequest("'input' must be a string or an array of items.", param="input")
    items = inp if isinstance(inp, list) else []
    for i in range(start, len(items)):
        item = items[i]
        if not isinstance(item, dict):
            raise BadRequest(f"'input[{i}]' must be an object.", param=f"input[{i}]")
        for name in ("role", "type"):
            value = item.get(name)
            if value is not None and not isinstance(value, str):
                where = f"input[{i}].{name}"
                raise BadRequest(f"'{where}' must be a string; got {echo(value)}.", param=where)
        content = item.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise BadRequest(
                f"'input[{i}].content' must be a string or an array of parts.",
                param=f"input[{i}].content",
            )
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, (str, list)):
        raise BadRequest("'instructions' must be a string.", param="instructions")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("'tools' must be an array.", param="tools")
    if body.get("background") is True and body.get("stream") is not True:
        # answered "queued", billed, and never readable: a stored response's retrieval
        # (``GET /v1/responses/{id}``) is not relayed
        raise BadRequest(
            "'background': true is not served by this proxy unless streamed: the response "
            "could never be retrieved through it (GET /v1/responses/{id} is not relayed). "
            "Send the request without 'background', or with 'stream': true.",
            param="background",
        )


GEMINI_ROLES = frozenset({"user", "model"})
# ``:countTokens`` takes the request it would count wrapped under this name, instead of contents
GEMINI_WRAPPED = "generateContentRequest"


def gemini_count_request(body: dict[str, Any]) -> dict[str, Any]:
    """A ``:countTokens`` body as the ``generateContent`` body it counts: the wrapped request
    (``generateContentRequest``) when it has no ``contents`` of its own, else itself."""
    if "contents" in body or GEMINI_WRAPPED not in body:
        return body
    inner = body[GEMINI_WRAPPED]
    if not isinstance(inner, dict):
        raise BadRequest(f"'{GEMINI_WRAPPED}' must be an object.", param=GEMINI_WRAPPED)
    return inner


def validate_gemini_count(body: dict[str, Any], start: int = 0) -> None:
    """``validate_gemini`` on a ``:countTokens`` body, in either form."""
    inner = gemini_count_request(body)
    validate_gemini(inner, start if inner is body else 0)


def validate_gemini(body: dict[str, Any], start: int = 0) -> None:
    """A ``generateContent`` body (the model is the path's): ``contents`` an array of objects
    with a role ``user`` or ``model`` (or none: a single-turn request's) and an array of parts,
    each an object. ``start``: the contents before it were validated at the same index before."""
    contents = body.get("contents")
    if not isinstance(contents, list):
        raise BadRequest("'contents' is required and must be an array.", param="contents")
    for i in range(start, len(contents)):
        c = contents[i]
        if not isinstance(c, dict):
            raise BadRequest(f"'contents[{i}]' must be an object.", param=f"contents[{i}]")
        r = c.get("role")
        if r is not None and (not isinstance(r, str) or r not in GEMINI_ROLES):
            raise BadRequest(
                f"'contents[{i}].role' must be one of {sorted(GEMINI_ROLES)}; got {echo(r)}.",
                param=f"contents[{i}].role",
            )
        parts = c.get("parts")
        if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
            raise BadRequest(
                f"'contents[{i}].parts' must be an array of objects.", param=f"contents[{i}].parts"
            )
    for key in ("systemInstruction", "system_instruction"):
        system = body.get(key)
        if system is not None and not isinstance(system, (dict, str)):
            raise BadRequest(f"'{key}' must be a Content object.", param=key)
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("'tools' must be an array.", param="tools")
