"""The one validator of tool chains: used by ``repair_tool_chain`` (nothing to do when it finds
nothing), by the pipeline's final integrity check, and by the tests.

It checks what providers enforce (design section 5):

- ``orphan_result``: a ``tool`` message that does not answer a call of the assistant message
  directly before its block of tool messages (or has no string ``tool_call_id``);
- ``unanswered_call``: a call not answered before the next non-tool message (or the end);
- ``duplicate_result``: a call answered twice in its block;
- ``duplicate_call_id`` / ``invalid_call_id``: call ids must be unique in the request and match
  ``^[a-zA-Z0-9_-]+$``;
- ``invalid_call``: a call that is not an object with a ``function`` holding a string ``name``
  and ``type: "function"``;
- ``invalid_arguments``: ``arguments`` not a string holding a JSON object;
- ``empty_tool_calls``: ``tool_calls`` present but an empty array (or not an array);
- ``empty_assistant``: an assistant message with neither text nor calls;
- ``null_tool_content``: a tool message whose content is null/missing.

Each violation is ``{kind, index, tool_call_id, message}``.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from rules.base import Message, Messages
from rules.messages import role, text_of

ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")


def valid_id(value: Any) -> bool:
    return isinstance(value, str) and ID_PATTERN.match(value) is not None


def arguments_ok(call: dict[str, Any]) -> bool:
    """``function.arguments`` is a string holding a JSON object."""
    fn = call.get("function")
    args = fn.get("arguments") if isinstance(fn, dict) else None
    if not isinstance(args, str):
        return False
    try:
        return isinstance(orjson.loads(args), dict)
    except orjson.JSONDecodeError:
        return False


def call_shape_ok(call: Any) -> bool:
    if not isinstance(call, dict) or call.get("type") != "function":
        return False
    fn = call.get("function")
    return isinstance(fn, dict) and isinstance(fn.get("name"), str) and bool(fn["name"])


def empty_content(content: Any) -> bool:
    """No readable text (Anthropic rejects empty and whitespace-only text blocks)."""
    if content is None:
        return True
    if isinstance(content, str):
        return not content.strip()
    if isinstance(content, list):
        return all(isinstance(p, dict) and p.get("type") == "text" for p in content) and not (
            text_of(content).strip()
        )
    return False


def _v(kind: str, index: int, tool_call_id: Any, message: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "index": index,
        "tool_call_id": tool_call_id if isinstance(tool_call_id, str) else None,
        "message": message,
    }


def _check_calls(i: int, m: Message, seen: set[str], out: list[dict[str, Any]]) -> list[Any]:
    """Violations of one assistant message's calls; returns its well-formed call ids."""
    if "tool_calls" not in m or m["tool_calls"] is None:
        calls: list[Any] = []
    elif not isinstance(m["tool_calls"], list) or not m["tool_calls"]:
        out.append(_v("empty_tool_calls", i, None, "tool_calls is present but empty"))
        calls = []
    else:
        calls = m["tool_calls"]
    ids: list[Any] = []
    for call in calls:
        cid = call.get("id") if isinstance(call, dict) else None
        ids.append(cid)
        if not call_shape_ok(call):
            out.append(_v("invalid_call", i, cid, "call lacks type 'function' or a name"))
        elif not arguments_ok(call):
            out.append(_v("invalid_arguments", i, cid, "arguments are not a JSON object string"))
        if not valid_id(cid):
            out.append(_v("invalid_call_id", i, cid, f"call id {cid!r} does not match pattern"))
        elif cid in seen:
            out.append(_v("duplicate_call_id", i, cid, f"call id {cid!r} is used twice"))
        else:
            seen.add(cid)
    if not calls and empty_content(m.get("content")):
        out.append(_v("empty_assistant", i, None, "assistant message has neither text nor calls"))
    return ids


def find_violations(messages: Messages) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    n = len(messages)
    i = 0
    while i < n:
        m = messages[i]
        r = role(m)
        if r != "assistant" and r != "tool":
            i += 1
            continue
        ids: list[Any] = _check_calls(i, m, seen_ids, out) if r == "assistant" else []
        # A tool message reached here is not in an assistant message's block: an orphan.
        j = i if r == "tool" else i + 1
        pending = {cid for cid in ids if isinstance(cid, str)}
        answered: set[str] = set()
        while j < n and role(messages[j]) == "tool":
            t = messages[j]
            tid = t.get("tool_call_id")
            if t.get("content") is None:
                out.append(_v("null_tool_content", j, tid, "tool message content is null"))
            if isinstance(tid, str) and tid in answered:
                out.append(_v("duplicate_result", j, tid, f"call {tid!r} is answered twice"))
            elif isinstance(tid, str) and tid in pending:
                answered.add(tid)
            else:
                out.append(
                    _v("orphan_result", j, tid, "tool message answers no call directly before it")
                )
            j += 1
        for cid in ids:
            if isinstance(cid, str) and cid not in answered:
                out.append(_v("unanswered_call", i, cid, f"call {cid!r} has no result"))
            elif not isinstance(cid, str):
                out.append(_v("unanswered_call", i, None, "call without an id has no result"))
        i = max(j, i + 1)
    return out
