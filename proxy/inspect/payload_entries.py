"""Each protocol's captured body read as a list of entries, in its own terms: Chat Completions'
``messages``; Anthropic Messages' ``system`` and ``messages`` (content blocks: text,
``tool_use``, ``tool_result``, thinking); the Responses API's ``instructions`` and ``input`` (a
string, or items: messages, ``function_call``, ``function_call_output``, reasoning …); Gemini's
``systemInstruction`` and ``contents`` (parts: text, ``functionCall``, ``functionResponse``,
thought …). An entry is a label, a role and the lines a person reads. The bodies are read as
they were sent, not through the protocol adapters: an adapter mends a broken history while
lowering it, which would hide the very repairs the diff is there to show."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from proxy.protocols.gemini_parts import call_of, response_of
from rules.messages import call_arguments_text, call_name, text_of, tool_calls

MAX_LINE_CHARS = 2000  # one line of an opaque part (JSON of an unknown item)


@dataclass(frozen=True)
class Entry:
    """One message or item of a body as the diff shows it."""

    noun: str  # "message", "item"; "" for a part of its own ("system", "instructions", "input")
    index: int | None  # its index in the body's array (None: a part of its own)
    role: str  # the message's role, or the item's type
    slot: tuple[str, str]  # (role, call id): pairs entries inside a changed run
    key: bytes  # its JSON with sorted keys: equal entries are the same bytes
    lines: list[str]

    @property
    def label(self) -> str:
        return f"{self.noun} {self.index}" if self.noun else self.role


def message_lines(message: dict[str, Any]) -> list[str]:
    """A Chat Completions message as lines: its text, the call it answers, the calls it makes."""
    lines = text_of(message.get("content")).splitlines()
    if message.get("tool_call_id"):
        lines.insert(0, f"(result of {message['tool_call_id']})")
    for c in tool_calls(message):
        lines.append(f"→ {call_name(c)}({call_arguments_text(c)}) [{c.get('id', '')}]")
    return lines


def _json(value: Any) -> str:
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        text = repr(value)
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 1] + "…"


def _key(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return repr(value).encode()


def clip(data: bytes) -> str:
    text = data.decode(errors="replace")
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 1] + "…"


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


# ----- Anthropic Messages -----


def _block_lines(block: Any) -> list[str]:
    """One Anthropic content block (or a Responses content part) as lines."""
    if isinstance(block, str):
        return block.splitlines()
    if not isinstance(block, dict):
        return [_json(block)]
    kind = block.get("type")
    if kind in ("text", "input_text", "output_text") or (kind is None and "text" in block):
        return _str(block.get("text")).splitlines()
    if kind == "tool_use" or kind == "server_tool_use":
        return [f"→ {_str(block.get('name'))}({_json(block.get('input'))}) [{block.get('id', '')}]"]
    if kind == "tool_result":
        lines = [f"(result of {block.get('tool_use_id', '')})"]
        content = block.get("content")
        parts = content if isinstance(content, list) else [content] if content else []
        for part in parts:
            lines += _block_lines(part)
        return lines
    if kind == "thinking":
        return ["(thinking)", *_str(block.get("thinking")).splitlines()]
    if kind == "redacted_thinking":
        return ["(redacted thinking)"]
    if kind == "refusal":
        return ["(refusal)", *_str(block.get("refusal")).splitlines()]
    return [f"[{kind or 'part'}] {_json(block)}"]


def _content_lines(content: Any) -> list[str]:
    if isinstance(content, list):
        return [line for part in content for line in _block_lines(part)]
    return _block_lines(content) if content is not None else []


def _anthropic_entries(body: dict[str, Any]) -> list[Entry] | None:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    out: list[Entry] = []
    system = body.get("system")
    if system:
        lines = _content_lines(system)
        out.append(Entry("", None, "system", ("system", ""), _key(system), lines))
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        role = _str(m.get("role"))
        content = m.get("content")
        ids = [
            _str(b.get("tool_use_id"))
            for b in (content if isinstance(content, list) else [])
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        out.append(
            Entry("message", i, role, (role, ",".join(ids)), _key(m), _content_lines(content))
        )
    return out


# ----- the Responses API -----


def _output_lines(output: Any) -> list[str]:
    return _content_lines(output) if isinstance(output, list) else _str(output).splitlines()


def _item_lines(item: dict[str, Any], kind: str) -> list[str]:
    call = _str(item.get("call_id"))
    if kind == "message":
        return _content_lines(item.get("content"))
    if kind == "function_call":
        return [f"→ {_str(item.get('name'))}({_str(item.get('arguments'))}) [{call}]"]
    if kind == "custom_tool_call":
        return [f"→ {_str(item.get('name'))}({_str(item.get('input'))}) [{call}]"]
    if kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        return [f"(result of {call})", *_output_lines(item.get("output"))]
    if kind == "reasoning":
        lines = ["(reasoning)"]
        for part in item.get("summary") or []:
            lines += _block_lines(part)
        if item.get("encrypted_content"):
            lines.append("(encrypted content)")
        return lines
    return [_json(item)]


def _responses_entries(body: dict[str, Any]) -> list[Entry] | None:
    inp = body.get("input")
    if not isinstance(inp, (list, str)):
        return None
    out: list[Entry] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        out.append(
            Entry(
                "",
                None,
                "instructions",
                ("instructions", ""),
                _key(instructions),
                instructions.splitlines(),
            )
        )
    if isinstance(inp, str):
        out.append(Entry("", None, "input", ("input", ""), _key(inp), inp.splitlines()))
        return out
    for i, item in enumerate(inp):
        if not isinstance(item, dict):
            out.append(Entry("item", i, "?", ("?", ""), _key(item), [_json(item)]))
            continue
        kind = _str(item.get("type")) or ("message" if "role" in item else "?")
        role = _str(item.get("role")) if kind == "message" else kind
        call = _str(item.get("call_id"))
        out.append(Entry("item", i, role, (role, call), _key(item), _item_lines(item, kind)))
    return out


# ----- Chat Completions -----


def _chat_entries(body: dict[str, Any]) -> list[Entry] | None:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    out = []
    for i, m in enumerate(messages):
        if isinstance(m, dict):
            role = _str(m.get("role"))
            slot = (role, str(m.get("tool_call_id") or ""))
            out.append(Entry("message", i, role, slot, _key(m), message_lines(m)))
    return out


def _part_lines(part: Any) -> list[str]:
    """One Gemini part as lines."""
    if not isinstance(part, dict):
        return [_json(part)]
    call, answer = call_of(part), response_of(part)  # either spelling
    if isinstance(call, dict):
        return [f"→ {_str(call.get('name'))}({_json(call.get('args'))}) [{call.get('id', '')}]"]
    if isinstance(answer, dict):
        head = f"(result of {_str(answer.get('name'))} {answer.get('id', '')})".replace(" )", ")")
        return [head, *_json(answer.get("response")).splitlines()]
    if isinstance(part.get("text"), str):
        lines = part["text"].splitlines()
        return ["(thinking)", *lines] if part.get("thought") else lines
    return [f"[part] {_json(part)}"]


def _gemini_entries(body: dict[str, Any]) -> list[Entry] | None:
    contents = body.get("contents")
    if not isinstance(contents, list):
        return None
    out: list[Entry] = []
    system = body.get("systemInstruction") or body.get("system_instruction")
    if isinstance(system, dict):
        lines = [line for p in system.get("parts") or [] for line in _part_lines(p)]
        out.append(Entry("", None, "system", ("system", ""), _key(system), lines))
    for i, c in enumerate(contents):
        if not isinstance(c, dict):
            continue
        role = _str(c.get("role") or "user")
        value = c.get("parts")
        parts: list[Any] = value if isinstance(value, list) else []
        ids = [_str(r.get("id")) for r in map(response_of, parts) if r is not None]
        lines = [line for p in parts for line in _part_lines(p)]
        slot = (role, ",".join(dict.fromkeys(ids)))  # a response restored twice: one slot
        out.append(Entry("content", i, role, slot, _key(c), lines))
    return out


READERS = {
    "chat": _chat_entries,
    "anthropic": _anthropic_entries,
    "responses": _responses_entries,
    "gemini": _gemini_entries,
}


def protocol_of(row: dict[str, Any], body: dict[str, Any]) -> str:
    """The row's protocol; a row logged before rows said so is told by its body's shape."""
    name = row.get("protocol")
    if name in READERS:
        return str(name)
    if "input" in body and "messages" not in body:
        return "responses"
    if "contents" in body and "messages" not in body:
        return "gemini"
    return "anthropic" if "system" in body and isinstance(body.get("messages"), list) else "chat"


def _body(value: Any) -> dict[str, Any] | None:
    if isinstance(value, (str, bytes)):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value if isinstance(value, dict) else None


def entries(row: dict[str, Any], column: str) -> list[Entry] | None:
    """The entries of a captured body (``request_body``, ``forwarded_body``); None without one."""
    body = _body(row.get(column))
    if body is None:
        return None
    return READERS[protocol_of(row, body)](body)
