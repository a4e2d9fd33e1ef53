"""The client's conversation against the forwarded one, from the captured payloads, in each
protocol's own terms: Chat Completions' ``messages``; Anthropic Messages' ``system`` and
``messages`` (content blocks: text, ``tool_use``, ``tool_result``, thinking); the Responses API's
``instructions`` and ``input`` (a string, or items: messages, ``function_call``,
``function_call_output``, reasoning …); Gemini's ``systemInstruction`` and ``contents`` (parts:
text, ``functionCall``, ``functionResponse``, thought …). Each side is read as a list of entries
(a label, a role, the lines a person reads); the lists are aligned entry by entry and each
changed entry is shown as a capped unified diff. The bodies are read as they were sent, not
through the protocol adapters: an adapter mends a broken history while lowering it, which would
hide the very repairs the diff is there to show."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from proxy.inspect.line_diff import Budget, diff_lines
from proxy.inspect.payload_align import aligned
from proxy.protocols.gemini_parts import call_of, response_of
from rules.messages import call_arguments_text, call_name, text_of, tool_calls

MAX_DIFF_LINES = 60  # per changed entry: a pruned 5,000-line log must not flood the view
MAX_LINE_CHARS = 2000  # one line of an opaque part (JSON of an unknown item)
MAX_HUNKS = 400  # entries a page shows (its unchanged runs among them)
MAX_PAGE_LINES = 8_000  # diff lines a page shows, all its entries together


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


def _clip(data: bytes) -> str:
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


def captured(row: dict[str, Any]) -> bool:
    return bool(row.get("request_body")) and bool(row.get("forwarded_body"))


def diff(row: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The client's entries against the forwarded ones, aligned entry by entry; None when the
    payloads were not captured (or cannot be read). Each item: ``op`` (same, changed, removed,
    added), ``title`` (the line a person reads), ``client`` / ``forwarded`` (body indices: a
    [first, last] pair for a same run), ``role`` and ``lines`` (the diff's lines)."""
    client, forwarded = entries(row, "request_body"), entries(row, "forwarded_body")
    if client is None or forwarded is None:
        return None
    out: list[dict[str, Any]] = []
    budget = Budget()
    for op, a1, a2, b1, b2 in aligned([e.key for e in client], [e.key for e in forwarded]):
        if op == "equal":
            out.append(_same(client[a1:a2], forwarded[b1:b2]))
            continue
        # Inside a changed run, pair entries in the same slot (role and call id), so an inserted
        # synthetic result is "added" rather than a rewrite of the next user turn.
        inner = aligned([e.slot for e in client[a1:a2]], [e.slot for e in forwarded[b1:b2]])
        for op2, i1, i2, j1, j2 in inner:
            if op2 == "equal":
                pairs = zip(client[a1 + i1 : a1 + i2], forwarded[b1 + j1 : b1 + j2], strict=True)
                out.extend(_changed(a, b, budget) for a, b in _shown(pairs, out))
                continue
            out.extend(_one("removed", e) for e in _shown(client[a1 + i1 : a1 + i2], out))
            out.extend(_one("added", e) for e in _shown(forwarded[b1 + j1 : b1 + j2], out))
    return _bounded(out)


def _shown(items: Any, out: list[dict[str, Any]]) -> Any:
    """``items`` while the page has room for their hunks (``MAX_HUNKS``); past it each is
    counted, not diffed (a body of 19,000 repaired messages made a 40 MB page that held the
    event loop 4 s)."""
    for item in items:
        if len(out) >= MAX_HUNKS:
            out.append({"op": "more"})
        else:
            yield item


def _bounded(out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hunks that fit the page (``MAX_HUNKS``, ``MAX_PAGE_LINES``), and one line for the
    rest."""
    kept: list[dict[str, Any]] = []
    lines = more = 0
    for item in out:
        size = len(item.get("lines") or ())
        if item["op"] == "more" or len(kept) >= MAX_HUNKS or lines + size > MAX_PAGE_LINES:
            more += item["op"] != "same"
            continue
        kept.append(item)
        lines += size
    if more:
        kept.append({"op": "same", "title": f"… {more} more changed entries, not shown"})
    return kept


def _span(run: list[Entry]) -> str:
    """What a run of unchanged entries is called: ``messages 0..4``, ``system, messages 0..2``."""
    parts = [e.label for e in run if e.index is None]
    numbered = [e for e in run if e.index is not None]
    if numbered:
        parts.append(f"{numbered[0].noun}s {numbered[0].index}..{numbered[-1].index}")
    return ", ".join(parts)


def _same(client: list[Entry], forwarded: list[Entry]) -> dict[str, Any]:
    def bounds(run: list[Entry]) -> list[int | None]:
        numbered = [e.index for e in run if e.index is not None]
        return [numbered[0], numbered[-1]] if numbered else [None, None]

    return {
        "op": "same",
        "client": bounds(client),
        "forwarded": bounds(forwarded),
        "title": f"= {_span(client)} unchanged",
    }


def _one(op: str, e: Entry) -> dict[str, Any]:
    if op == "removed":
        sign, side, what = "-", "client", "not forwarded"
    else:
        sign, side, what = "+", "forwarded", "added by the proxy"
    return {
        "op": op,
        side: e.index,
        "role": e.role,
        "title": f"{sign} {e.label} {what} ({e.role})",
        "lines": _cap([f"{sign} " + x for x in e.lines]),
    }


def _changed(a: Entry, b: Entry, budget: Budget) -> dict[str, Any]:
    lines, total = diff_lines(a.lines, b.lines, budget, MAX_DIFF_LINES)
    if not lines:  # the same text, other fields (e.g. a re-serialised id): show the fields
        lines = [f"- {_clip(a.key)}", f"+ {_clip(b.key)}"]
    if a.noun and a.noun == b.noun:
        where = f"{a.label} → {b.index}"
    else:
        where = a.label if a.label == b.label else f"{a.label} → {b.label}"
    return {
        "op": "changed",
        "client": a.index,
        "forwarded": b.index,
        "role": b.role,
        "title": f"~ {where} ({b.role})",
        "lines": _cap(lines, total),
    }


def _cap(lines: list[str], total: int | None = None) -> list[str]:
    """The first ``MAX_DIFF_LINES`` of ``lines`` (of ``total``, when only those were made)."""
    total = len(lines) if total is None else total
    if total <= MAX_DIFF_LINES:
        return lines
    return [*lines[:MAX_DIFF_LINES], f"… {total - MAX_DIFF_LINES} more lines"]
