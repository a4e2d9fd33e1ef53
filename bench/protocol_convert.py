"""Chat Completions conversations (the trace corpus' shape) converted into Anthropic Messages and
Responses API bodies, the way Claude Code and Codex would have sent the same conversation.

Anthropic Messages (``to_anthropic``):
- leading system messages: top-level ``system`` text blocks; a later one stays a ``system``
  message (Claude Code sends those too);
- an assistant message: its ``reasoning_content`` as a ``thinking`` block (with a stand-in
  signature), its text as a text block (none when empty), each tool call a ``tool_use`` block
  (same id, ``input`` parsed from ``arguments``; arguments that are not a JSON object become
  ``{}`` and are counted in ``Conversion.losses``);
- every tool and user message between two assistant turns: ONE user message (Anthropic wants the
  roles to alternate), its ``tool_result`` blocks first (in order, same ids), then the user text
  blocks; a user message on its own keeps string content.

Claude Code's cache breakpoints (``with_breakpoints``, as its requests carry them: see
``../shared/agents/README.md``): ``cache_control: {"type": "ephemeral"}`` on the last ``system``
block (Claude Code marks its two static system blocks, after an unmarked billing line; a
converted conversation has its system prompt as one block) and on the last content block of the
last message, a string content becoming one text block to carry it (as Claude Code does; the
message before goes back to a string once the breakpoint has moved on, since each request is
converted anew).

Responses (``to_responses``):
- system messages: the first leading one as ``instructions`` (``system="instructions"``) and the
  others as ``system`` message items, or every one as a ``developer`` message item as Codex sends
  them (``system="developer"``);
- a user message: a ``message`` item with ``input_text`` parts;
- an assistant message: a ``reasoning`` item (its ``reasoning_content`` as summary text; only when
  an item of the turn follows it, as Responses requires), a ``message`` item with ``output_text``
  when it has text (or neither text nor calls), a ``function_call`` item per call (``call_id`` =
  the call's id);
- a tool message: a ``function_call_output`` item (same ``call_id``).

Tools (``tools`` in chat form) are converted too: Anthropic ``{name, description, input_schema}``,
Responses ``{type: "function", name, description, parameters}``.

    .venv/bin/python -m bench.protocol_convert --limit 1   # print one converted conversation
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import Any

import orjson

from rules.messages import text_of

SIGNATURE = "bench-converted"  # the stand-in signature of a converted thinking block
ENCRYPTED = "bench-converted"  # and of a converted reasoning item's encrypted content


@dataclass
class Conversion:
    body: dict[str, Any]
    losses: list[str] = field(default_factory=list)  # what the target protocol could not carry


def _text_parts(content: Any) -> list[str]:
    """The texts of a chat message's content (a string, or parts)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        out = []
        for p in content:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                out.append(p["text"])
            elif isinstance(p, str):
                out.append(p)
        return out
    return [text_of(content)]


def _input(arguments: Any, losses: list[str], call_id: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = orjson.loads(arguments or "{}")
    except (orjson.JSONDecodeError, TypeError):
        value = None
    if not isinstance(value, dict):
        losses.append(f"tool call {call_id}: arguments are not a JSON object")
        return {}
    return value


def _leading_systems(messages: list[dict[str, Any]]) -> int:
    n = 0
    while n < len(messages) and messages[n].get("role") == "system":
        n += 1
    return n


# --- Anthropic Messages -------------------------------------------------------------------------


def anthropic_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    out = []
    for t in tools:
        fn = t.get("function") or t
        tool = {"name": fn.get("name")}
        if fn.get("description") is not None:
            tool["description"] = fn["description"]
        tool["input_schema"] = fn.get("parameters") or {"type": "object", "properties": {}}
        out.append(tool)
    return out


def _assistant_blocks(m: dict[str, Any], losses: list[str]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    reasoning = m.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning.strip():
        blocks.append({"type": "thinking", "thinking": reasoning, "signature": SIGNATURE})
    blocks.extend({"type": "text", "text": t} for t in _text_parts(m.get("content")) if t.strip())
    for c in m.get("tool_calls") or []:
        fn = c.get("function") or {}
        blocks.append({"type": "tool_use", "id": c.get("id"), "name": fn.get("name"),
                       "input": _input(fn.get("arguments"), losses, c.get("id"))})  # fmt: skip
    return blocks


def _tool_result(m: dict[str, Any]) -> dict[str, Any]:
    content = m.get("content")
    inner: Any = content if isinstance(content, str) else text_of(content)
    return {"type": "tool_result", "tool_use_id": m.get("tool_call_id"), "content": inner}


def _user_turn(run: list[dict[str, Any]]) -> dict[str, Any]:
    """Tool and user messages between two assistant turns as one user message."""
    if len(run) == 1 and run[0].get("role") == "user" and isinstance(run[0].get("content"), str):
        return {"role": "user", "content": run[0]["content"]}
    results = [_tool_result(m) for m in run if m.get("role") == "tool"]
    texts = [
        {"type": "text", "text": t}
        for m in run
        if m.get("role") != "tool"
        for t in _text_parts(m.get("content"))
    ]
    return {"role": "user", "content": results + texts}


def to_anthropic(chat: dict[str, Any], max_tokens: int = 4096) -> Conversion:
    """``chat`` (a Chat Completions body: model, messages, optional tools, stream …) as an
    Anthropic Messages body."""
    messages: list[dict[str, Any]] = chat["messages"]
    losses: list[str] = []
    lead = _leading_systems(messages)
    system = [
        {"type": "text", "text": t} for m in messages[:lead] for t in _text_parts(m.get("content"))
    ]
    out: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []

    def flush() -> None:
        if run:
            out.append(_user_turn(run))
            run.clear()

    for m in messages[lead:]:
        r = m.get("role")
        if r in ("user", "tool"):
            run.append(m)
            continue
        flush()
        if r == "assistant":
            out.append({"role": "assistant", "content": _assistant_blocks(m, losses)})
        else:  # a later system (or developer) message
            out.append({"role": "system", "content": text_of(m.get("content"))})
    flush()
    body: dict[str, Any] = {"model": chat["model"], "max_tokens": max_tokens, "messages": out}
    if system:
        body["system"] = system
    tools = anthropic_tools(chat.get("tools"))
    if tools is not None:
        body["tools"] = tools
    if "stream" in chat:
        body["stream"] = chat["stream"]
    return Conversion(body, losses)


EPHEMERAL = {"type": "ephemeral"}


def with_breakpoints(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (a converted Messages body) with Claude Code's breakpoints (see above); what is
    not marked is shared with ``body``."""
    out = dict(body)
    system = body.get("system")
    if isinstance(system, list) and system and isinstance(system[-1], dict):
        out["system"] = [*system[:-1], {**system[-1], "cache_control": dict(EPHEMERAL)}]
    messages = body.get("messages") or []
    if messages:
        last = messages[-1]
        content = last.get("content")
        if isinstance(content, str) and content:
            blocks: list[Any] = [{"type": "text", "text": content}]
        elif isinstance(content, list) and content and isinstance(content[-1], dict):
            blocks = list(content)
        else:
            return out
        blocks[-1] = {**blocks[-1], "cache_control": dict(EPHEMERAL)}
        out["messages"] = [*messages[:-1], {**last, "content": blocks}]
    return out


# --- Responses ----------------------------------------------------------------------------------


def responses_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    out = []
    for t in tools:
        fn = t.get("function") or t
        tool = {"type": "function", "name": fn.get("name")}
        if fn.get("description") is not None:
            tool["description"] = fn["description"]
        tool["parameters"] = fn.get("parameters") or fn.get("input_schema") or {}
        out.append(tool)
    return out


def _message_item(role: str, texts: list[str]) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": t} for t in texts]}


def _assistant_items(m: dict[str, Any], encrypted: bool = True) -> list[dict[str, Any]]:
    texts = [t for t in _text_parts(m.get("content")) if t.strip()]
    calls = m.get("tool_calls") or []
    items: list[dict[str, Any]] = []
    if texts or not calls:
        items.append(_message_item("assistant", texts or [""]))
    for c in calls:
        fn = c.get("function") or {}
        arguments = fn.get("arguments")
        if not isinstance(arguments, str):
            arguments = orjson.dumps(arguments or {}).decode()
        items.append({"type": "function_call", "call_id": c.get("id"), "name": fn.get("name"),
                      "arguments": arguments})  # fmt: skip
    reasoning = m.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning.strip():
        summary = [{"type": "summary_text", "text": reasoning}]
        item = {"type": "reasoning", "summary": summary}
        if encrypted:  # as Codex sends it with store=false
            item["encrypted_content"] = ENCRYPTED
        items.insert(0, item)
    return items


def to_responses(
    chat: dict[str, Any], system: str = "instructions", encrypted_reasoning: bool = True
) -> Conversion:
    """``chat`` as a Responses API body; ``system``: "instructions" or "developer" (see above);
    ``encrypted_reasoning``: reasoning items carry ``encrypted_content`` (as Codex sends them)."""
    if system not in ("instructions", "developer"):
        raise ValueError(f"system must be 'instructions' or 'developer', not {system!r}")
    messages: list[dict[str, Any]] = chat["messages"]
    body: dict[str, Any] = {"model": chat["model"]}
    items: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        r = m.get("role")
        if r in ("system", "developer"):
            text = "\n\n".join(_text_parts(m.get("content")))
            if system == "instructions" and i == 0:
                body["instructions"] = text
            else:
                items.append(_message_item("developer" if system == "developer" else r, [text]))
        elif r == "user":
            items.append(_message_item("user", _text_parts(m.get("content")) or [""]))
        elif r == "assistant":
            items.extend(_assistant_items(m, encrypted_reasoning))
        elif r == "tool":
            content = m.get("content")
            output = content if isinstance(content, str) else text_of(content)
            items.append({"type": "function_call_output", "call_id": m.get("tool_call_id"),
                          "output": output})  # fmt: skip
    body["input"] = items
    tools = responses_tools(chat.get("tools"))
    if tools is not None:
        body["tools"] = tools
    if "stream" in chat:
        body["stream"] = chat["stream"]
    return Conversion(body, [])


def main() -> None:
    from tests.support.traces import iter_conversations

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=1)
    parser.add_argument("--protocol", choices=["anthropic", "responses"], default="anthropic")
    args = parser.parse_args()
    for conv in list(iter_conversations())[: args.limit]:
        chat = {"model": "gpt-4o", "messages": conv["messages"]}
        done = to_anthropic(chat) if args.protocol == "anthropic" else to_responses(chat)
        print(json.dumps(done.body, indent=1, ensure_ascii=False)[:4000])


if __name__ == "__main__":
    main()
