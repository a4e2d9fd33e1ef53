"""Breaks of Anthropic's own shape, mended before the chat view is made (the chain itself is the
rules' to repair): Anthropic answers 400 to "text content blocks must be non-empty", and with
thinking on, to a turn whose ``tool_use`` lost the thinking block that came before it (a client
or a trimmer that split one assistant turn into two). Each mend is reported as a repair; the
messages it does not touch are the client's own objects."""

from __future__ import annotations

from typing import Any

_THINKING = frozenset({"thinking", "redacted_thinking"})
EMPTY_TEXT = "(empty)"  # what an emptied message says instead (Anthropic refuses empty content)


def _empty_text(block: Any) -> bool:
    if not isinstance(block, dict) or block.get("type") != "text":
        return False
    text = block.get("text")
    return isinstance(text, str) and not text.strip()


def _thinking_only(message: Any) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(b, dict) and b.get("type") in _THINKING for b in content)
    )


def _repair(kind: str, index: int, action: str) -> dict[str, Any]:
    return {"kind": kind, "index": index, "tool_call_id": None, "action": action}


def mend(messages: list[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    """The messages with Anthropic's own breaks mended, and the repairs made (indices are the
    client's). The list is ``messages`` itself when nothing needed mending."""
    if not any(_needs_mending(messages, i) for i in range(len(messages))):
        return messages, []
    out: list[Any] = []
    repairs: list[dict[str, Any]] = []
    carried: list[Any] = []  # thinking blocks waiting for the turn they belong to
    last = len(messages) - 1
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            out.append(m)
            continue
        if carried and m.get("role") == "assistant":
            content = m.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            m = {**m, "content": carried + [b for b in blocks if not _empty_text(b)]}
            carried = []
            repairs.append(_repair("thinking_rejoined", i, "moved_thinking_into_turn"))
        elif carried:  # no turn followed: the thinking stays where it was
            out.append({"role": "assistant", "content": carried})
            carried = []
        if (
            m.get("role") == "assistant"
            and i < last
            and _thinking_only(m)
            and isinstance(messages[i + 1], dict)
            and messages[i + 1].get("role") == "assistant"
        ):
            carried = list(m["content"])
            continue
        content = m.get("content")
        if isinstance(content, list) and any(_empty_text(b) for b in content):
            kept = [b for b in content if not _empty_text(b)]
            final_assistant = i == last and m.get("role") == "assistant"
            if kept or final_assistant:
                m = {**m, "content": kept}
            else:
                m = {**m, "content": [{"type": "text", "text": EMPTY_TEXT}]}
            repairs.append(_repair("empty_text_block", i, "dropped_empty_text"))
        elif content in ("", []) and not (i == last and m.get("role") == "assistant"):
            m = {**m, "content": EMPTY_TEXT}
            repairs.append(_repair("empty_text_block", i, "filled_empty_message"))
        out.append(m)
    if carried:
        out.append({"role": "assistant", "content": carried})
    return out, repairs


def _needs_mending(messages: list[Any], i: int) -> bool:
    m = messages[i]
    if not isinstance(m, dict):
        return False
    content = m.get("content")
    final_assistant = i == len(messages) - 1 and m.get("role") == "assistant"
    if content in ("", []) and not final_assistant:
        return True
    if isinstance(content, list) and any(_empty_text(b) for b in content):
        return True
    nxt = messages[i + 1] if i + 1 < len(messages) else None
    return (
        m.get("role") == "assistant"
        and _thinking_only(m)
        and isinstance(nxt, dict)
        and nxt.get("role") == "assistant"
    )
