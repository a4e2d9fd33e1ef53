"""The Responses API (``POST /v1/responses``) to and from the chat view.

Lowering, item by item (``input[i]``; a string ``input`` is one user message):
- ``instructions``: a system message; message items (user, system, developer): a message each;
- ``function_call_output`` / ``custom_tool_call_output``: a tool message each;
- every other run of items (reasoning, assistant messages, ``function_call``,
  ``custom_tool_call``, server-side calls …) up to the next of those: ONE assistant message, its
  text the assistant messages' text, its ``tool_calls`` the calls (a custom call's raw input as
  ``{"input": …}``). Reasoning and server-side items are the adapter's to keep.

Lifting writes each output message back as its items: untouched ones as sent; a changed one
patched (arguments, output, text); a call the rules dropped takes the reasoning that came just
before it along, so a reasoning item is never left without the item that followed it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.protocols.base import TAG, Lowered, opaque_note
from proxy.protocols.patching import appended, patch_blocks, patch_parts
from rules.base import Message
from rules.messages import role, text_of, tool_calls

_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
_CALLS = frozenset({"function_call", "custom_tool_call"})
_OUTPUTS = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}
_OWN_ROLES = frozenset({"user", "system", "developer"})


@dataclass
class _Part:
    items: tuple[int, ...]  # input indices this message stands for (empty: string input)
    lowered: Message


@dataclass
class _State:
    items: list[Any]
    parts: dict[str, _Part]
    call_kinds: dict[str, str]  # call_id -> function_call | custom_tool_call
    mended: bool


def _kind(item: Any) -> str:
    if not isinstance(item, dict):
        return ""
    kind = item.get("type")
    if isinstance(kind, str):
        return kind
    return "message" if "role" in item else ""


def _is_text(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in _TEXT_PARTS


def _part_maker(role_name: str) -> Any:
    kind = "output_text" if role_name == "assistant" else "input_text"
    return lambda text: {"type": kind, "text": text}


def _message_text(item: dict[str, Any]) -> Any:
    """A message item's lowered content: its text, or parts when it has non-text parts."""
    content = item.get("content")
    if isinstance(content, str) or content is None:
        return content or ""
    parts = content if isinstance(content, list) else []
    if all(_is_text(p) for p in parts):
        return "\n\n".join(p["text"] if isinstance(p.get("text"), str) else "" for p in parts)
    return [
        {"type": "text", "text": p["text"] if isinstance(p.get("text"), str) else ""}
        if _is_text(p)
        else {"type": p.get("type") if isinstance(p, dict) else "unknown"}
        for p in parts
    ]  # fmt: skip


def _call(item: dict[str, Any]) -> dict[str, Any]:
    cid = item.get("call_id") or item.get("id")
    if _kind(item) == "custom_tool_call":
        raw = item.get("input")
        arguments = orjson.dumps({"input": raw if isinstance(raw, str) else ""}).decode()
    else:
        raw = item.get("arguments")
        arguments = raw if isinstance(raw, str) else orjson.dumps(raw or {}).decode()
    fn = {"name": item.get("name"), "arguments": arguments}
    return {"id": cid, "type": "function", "function": fn}


class ResponsesAdapter:
    name = "responses"

    def lower(self, body: dict[str, Any], session: str | None = None) -> Lowered:
        inp = body.get("input")
        items: list[Any] = inp if isinstance(inp, list) else []
        items, repairs = _mend(items)
        st = _State(items, {}, {}, bool(repairs))
        out: list[Message] = []
        instructions = body.get("instructions")
        if isinstance(instructions, str) and instructions:
            self._add(st, out, "s", _Part((), {"role": "system", "content": instructions}))
        if isinstance(inp, str):
            self._add(st, out, "u", _Part((), {"role": "user", "content": inp}))
        run: list[int] = []
        for i, item in enumerate(items):
            kind = _kind(item)
            if kind in _CALLS:
                cid = item.get("call_id")
                if isinstance(cid, str):
                    st.call_kinds[cid] = kind
            if kind == "message" and item.get("role") in _OWN_ROLES:
                self._flush(st, out, run)
                msg = {"role": item["role"], "content": _message_text(item)}
                self._add(st, out, f"{i}", _Part((i,), msg))
            elif kind in _OUTPUTS:
                self._flush(st, out, run)
                msg = {"role": "tool", "tool_call_id": item.get("call_id"),
                       "content": text_of(item.get("output"))}  # fmt: skip
                self._add(st, out, f"{i}", _Part((i,), msg))
            else:
                run.append(i)
        self._flush(st, out, run)
        return Lowered(out, _tools(body.get("tools")), repairs, st)

    def _flush(self, st: _State, out: list[Message], run: list[int]) -> None:
        if not run:
            return
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for i in run:
            item = st.items[i]
            kind = _kind(item)
            if kind == "message":
                text = _message_text(item)
                texts.append(text if isinstance(text, str) else text_of(text))
            elif kind in _CALLS:
                calls.append(_call(item))
        text = "\n\n".join(t for t in texts if t)
        if not text and not calls:
            text = opaque_note([_kind(st.items[i]) for i in run])
        msg: Message = {"role": "assistant", "content": text or None}
        if calls:
            msg["tool_calls"] = calls
        self._add(st, out, f"{run[0]}", _Part(tuple(run), msg))
        run.clear()

    @staticmethod
    def _add(st: _State, out: list[Message], tag: str, part: _Part) -> None:
        part.lowered[TAG] = tag
        st.parts[tag] = part
        out.append(part.lowered)

    def lift(
        self,
        body: dict[str, Any],
        lowered: Lowered,
        messages: list[Message],
        hashes: Sequence[str] | None = None,  # not used: measured, keeping liftings cost more
    ) -> dict[str, Any]:
        st: _State = lowered.state
        if messages is lowered.messages and not st.mended:
            return body
        forwarded = dict(body)
        out: list[Any] = []
        for m in messages:
            tag = m.get(TAG)
            part = st.parts.get(tag)  # type: ignore[arg-type]
            if tag == "s" and part is not None:
                if m != part.lowered:
                    forwarded["instructions"] = text_of(m.get("content"))
            elif tag == "u" and part is not None:
                out.append({"role": "user", "content": text_of(m.get("content"))})
            elif part is None:
                out.extend(_new_items(st, m))
            elif m is part.lowered or m == part.lowered:
                out.extend(st.items[i] for i in part.items)
            else:
                out.extend(_patched_items(st, part, m))
        if isinstance(body.get("input"), str) and len(out) == 1 and "type" not in out[0]:
            forwarded["input"] = out[0]["content"]
        else:
            forwarded["input"] = out
        return forwarded

    def hidden_text(self, body: dict[str, Any]) -> dict[str, str]:
        texts: list[str] = []
        inp = body.get("input")
        for item in inp if isinstance(inp, list) else []:
            if _kind(item) == "reasoning":
                for key in ("summary", "content"):
                    value = item.get(key)
                    if isinstance(value, list):
                        texts.extend(text_of(value).splitlines())
        return {"reasoning": "\n".join(texts)} if texts else {}


def _mend(items: list[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    """A reasoning item must be followed by the item it led to; one followed by a user message,
    a tool output or nothing at all was cut from it (Responses refuses it): it goes. Walked from
    the end, so a reasoning item left last by dropping the one after it goes too."""
    drop: list[int] = []
    nxt: Any = None  # the next item kept
    for i in range(len(items) - 1, -1, -1):
        item = items[i]
        if _kind(item) == "reasoning":
            next_kind = _kind(nxt)
            if (
                nxt is None
                or next_kind in _OUTPUTS
                or (next_kind == "message" and nxt.get("role") in _OWN_ROLES)
            ):
                drop.append(i)
                continue
        nxt = item
    if not drop:
        return items, []
    drop.reverse()
    gone = set(drop)
    repairs = [{"kind": "reasoning_orphaned", "index": i, "tool_call_id": None,
                "action": "dropped_reasoning_item"} for i in drop]  # fmt: skip
    return [it for i, it in enumerate(items) if i not in gone], repairs


def _new_items(st: _State, m: Message) -> list[Any]:
    """Items for a message the rules wrote."""
    r = role(m)
    if r == "tool":
        cid = m.get("tool_call_id")
        call_kind = st.call_kinds.get(cid) if isinstance(cid, str) else None
        kind = (
            "custom_tool_call_output" if call_kind == "custom_tool_call" else "function_call_output"
        )
        return [{"type": kind, "call_id": cid, "output": text_of(m.get("content"))}]
    if r == "assistant":
        out: list[Any] = []
        text = text_of(m.get("content"))
        if text.strip():
            out.append({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text}]})  # fmt: skip
        for c in tool_calls(m):
            fn = c.get("function") or {}
            out.append({"type": "function_call", "call_id": c.get("id"), "name": fn.get("name"),
                        "arguments": fn.get("arguments") or "{}"})  # fmt: skip
        return out
    text = text_of(m.get("content"))
    kind = "input_text"
    return [{"type": "message", "role": r if r in _OWN_ROLES else "user",
             "content": [{"type": kind, "text": text}]}]  # fmt: skip


def _patched_items(st: _State, part: _Part, m: Message) -> list[Any]:
    r = role(m)
    if r == "assistant":
        return _patched_assistant(st, part, m)
    item = st.items[part.items[0]]
    if r == "tool":
        old, new = part.lowered.get("content") or "", text_of(m.get("content"))
        output = item.get("output")
        if isinstance(output, list):
            output = patch_blocks(output, old, new, _is_text, _part_maker("user"))
        else:
            output = new
        patched = {**item, "output": output}
        if m.get("tool_call_id") != item.get("call_id"):
            patched["call_id"] = m.get("tool_call_id")
        return [patched]
    return [_patched_message(item, part.lowered.get("content"), m.get("content"))]


def _patched_message(item: dict[str, Any], old: Any, new: Any) -> dict[str, Any]:
    content = item.get("content")
    make = _part_maker(str(item.get("role")))
    if not isinstance(content, list):
        return {**item, "content": text_of(new)}
    if isinstance(old, list) and isinstance(new, list):
        return {**item, "content": patch_parts(content, old, new, _is_text, make)}
    if old is None:  # a replacement: the first text part takes it, the others go
        kept, placed = [], False
        for p in content:
            if not _is_text(p):
                kept.append(p)
            elif not placed:
                placed = True
                kept.append({**p, "text": text_of(new)})
        return {**item, "content": kept if placed else [*kept, make(text_of(new))]}
    old_text = old if isinstance(old, str) else text_of(old)
    return {**item, "content": patch_blocks(content, old_text, text_of(new), _is_text, make)}


def _patched_assistant(st: _State, part: _Part, m: Message) -> list[Any]:
    calls = tool_calls(m)
    lowered_calls = tool_calls(part.lowered)
    call_items = [i for i in part.items if _kind(st.items[i]) in _CALLS]
    if len(calls) == len(lowered_calls):
        matched = dict(zip(call_items, calls, strict=True))
    else:
        by_id = {c.get("id"): c for c in calls}
        matched = {i: by_id[cid] for i in call_items
                   if (cid := st.items[i].get("call_id")) in by_id}  # fmt: skip
    old_text = text_of(part.lowered.get("content"))
    new_text = text_of(m.get("content"))
    added = appended(old_text, new_text)
    suffix = f"\n\n{added}" if added else None
    last_message = max((i for i in part.items if _kind(st.items[i]) == "message"), default=-1)
    out: list[Any] = []
    waiting: list[Any] = []  # reasoning, until the item it led to is kept or dropped
    text_done = False
    for i in part.items:
        item = st.items[i]
        kind = _kind(item)
        if kind == "reasoning":
            waiting.append(item)
            continue
        if kind in _CALLS:
            call = matched.get(i)
            if call is None:
                waiting.clear()  # the call is gone: the reasoning that led to it goes too
                continue
            item = _patched_call(item, call)
        elif kind == "message" and new_text != old_text:
            if i == last_message and suffix is not None:
                item = _patched_message(item, _message_text(item), f"{_message_text(item)}{suffix}")
            elif suffix is None:
                if text_done:
                    continue  # replaced: the first message holds the new text
                text_done = True
                item = _patched_message(item, None, new_text)
        out.extend(waiting)
        waiting.clear()
        out.append(item)
    out.extend(waiting)
    known = {id(c) for c in matched.values()}
    out.extend(_new_items(st, {"role": "assistant", "content": None,
                              "tool_calls": [c for c in calls if id(c) not in known]}))  # fmt: skip
    return out


def _patched_call(item: dict[str, Any], call: dict[str, Any]) -> dict[str, Any]:
    fn = call.get("function") or {}
    arguments = fn.get("arguments")
    lowered = _call(item)
    out = item
    if call.get("id") != lowered["id"]:
        out = {**out, "call_id": call.get("id")}
    if isinstance(arguments, str) and arguments != lowered["function"]["arguments"]:
        if _kind(item) == "custom_tool_call":
            try:
                value = orjson.loads(arguments)
            except orjson.JSONDecodeError:
                value = None
            if isinstance(value, dict) and isinstance(value.get("input"), str):
                out = {**out, "input": value["input"]}
        else:
            out = {**out, "arguments": arguments}
    return out


def _tools(tools: Any) -> list[Any] | None:
    """Functions and custom tools as the rules read them; a namespace's functions flattened."""
    if not isinstance(tools, list):
        return None
    out: list[Any] = []
    for t in tools:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace" and isinstance(t.get("tools"), list):
            out.extend(_tools(t["tools"]) or [])
        elif t.get("type") in ("function", "custom") and isinstance(t.get("name"), str):
            fn = {"name": t["name"], "description": t.get("description", "")}
            if isinstance(t.get("parameters"), dict):
                fn["parameters"] = t["parameters"]
            out.append({"type": "function", "function": fn})
    return out


RESPONSES = ResponsesAdapter()
