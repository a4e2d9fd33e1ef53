"""Gemini function names fitted to another provider's rule, and given back in its answer.

Gemini allows dots and colons in a function's name (``files.read``, ``db:query``), up to 64
characters; OpenAI and Anthropic allow ``[A-Za-z0-9_-]`` only (OpenAI: 400 "Invalid
'tools[0].function.name'", on every retry while the tool is declared). A bridged request's names
that break that rule are fitted (each other character an ``_``, cut to 55, then ``_`` and a
digest of the name), in its declarations and in the history's calls and responses alike; the
answer's calls get their names back. A fitted name depends on its own name alone, never on the
others of the request (``files.read`` meets a declared ``files_read`` only in some requests), so
every request of a conversation sends the same bytes for it, and two names never meet.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

_FIT = re.compile(r"[A-Za-z0-9_-]{1,64}")
_OTHER = re.compile(r"[^A-Za-z0-9_-]")
_MAX = 64
_DECLARATIONS = ("functionDeclarations", "function_declarations")
_CALLS = ("functionCall", "function_call", "functionResponse", "function_response")


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def fitted_names(tools: Any, contents: Any) -> dict[str, str]:
    """Each name of the request that breaks the rule, with the name it is sent as (empty when
    every name fits: the common request)."""
    names = set(_declared(tools)) | set(_called(contents))
    unfit = sorted(n for n in names if not _FIT.fullmatch(n))
    if not unfit:
        return {}
    return {name: f"{_OTHER.sub('_', name)[: _MAX - 9]}_{_digest(name)}" for name in unfit}


def renamed_request(tools: Any, contents: Any, names: Mapping[str, str]) -> tuple[Any, Any]:
    """``tools`` and ``contents`` with ``names`` applied (copies where a name changed)."""
    return _renamed_tools(tools, names), [_renamed_content(c, names) for c in contents]


def restored_answer(answer: Any, names: Mapping[str, str]) -> Any:
    """A Gemini answer (or stream chunk) whose calls carry the names the client declared."""
    back = {v: k for k, v in names.items()}
    for candidate in answer.get("candidates") or () if isinstance(answer, dict) else ():
        content = candidate.get("content") if isinstance(candidate, dict) else None
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            call = part.get("functionCall") if isinstance(part, dict) else None
            if not isinstance(call, dict):
                continue
            name = call.get("name")
            if isinstance(name, str) and name in back:
                call["name"] = back[name]
    return answer


def restored_event(event: bytes, names: Mapping[str, str]) -> bytes:
    """An SSE event's ``data:`` lines with ``restored_answer`` applied."""
    lines = []
    for line in event.split(b"\n"):
        if line.startswith(b"data:") and line[5:].strip():
            try:
                data = orjson.loads(line[5:])
            except orjson.JSONDecodeError:
                lines.append(line)
                continue
            line = b"data: " + orjson.dumps(restored_answer(data, names))
        lines.append(line)
    return b"\n".join(lines)


def _declared(tools: Any) -> Iterable[str]:
    for tool in tools if isinstance(tools, list) else ():
        for key in _DECLARATIONS:
            listed = tool.get(key) if isinstance(tool, dict) else None
            for declaration in listed if isinstance(listed, list) else ():
                name = declaration.get("name") if isinstance(declaration, dict) else None
                if isinstance(name, str):
                    yield name


def _called(contents: Any) -> Iterable[str]:
    for content in contents if isinstance(contents, list) else ():
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            for key in _CALLS:
                held = part.get(key) if isinstance(part, dict) else None
                if isinstance(held, dict) and isinstance(held.get("name"), str):
                    yield held["name"]


def _renamed_tools(tools: Any, names: Mapping[str, str]) -> Any:
    if not isinstance(tools, list):
        return tools
    out = []
    for tool in tools:
        if isinstance(tool, dict):
            tool = dict(tool)
            for key in _DECLARATIONS:
                if isinstance(tool.get(key), list):
                    tool[key] = [_renamed(d, names) for d in tool[key]]
        out.append(tool)
    return out


def _renamed_content(content: Any, names: Mapping[str, str]) -> Any:
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list):
        return content
    out = []
    for part in parts:
        if isinstance(part, dict):
            for key in _CALLS:
                if isinstance(part.get(key), dict):
                    part = {**part, key: _renamed(part[key], names)}
        out.append(part)
    return {**content, "parts": out}


def _renamed(holder: Any, names: Mapping[str, str]) -> Any:
    name = holder.get("name") if isinstance(holder, dict) else None
    if isinstance(name, str) and name in names:
        return {**holder, "name": names[name]}
    return holder
