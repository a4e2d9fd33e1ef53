"""Anthropic Messages (``POST /v1/messages``) to and from the chat view.

Lowering, message by message (``messages[i]``):
- the top-level ``system`` and a ``role: "system"`` message: a system message;
- a user message: each ``tool_result`` block a tool message, the other blocks (in runs between
  them) a user message (a string when it is one text block);
- an assistant message: one assistant message, its text blocks joined, its ``tool_use`` blocks as
  ``tool_calls``; thinking, redacted thinking and server-tool blocks are the adapter's to keep.

Lifting walks the rules' output: an untouched message is the client's own object; a changed one
is patched block by block (``patching``); tool results the rules added or moved go first in the
user message after their call, as Anthropic requires. Before lowering, two breaks of Anthropic's
own are mended (``anthropic_mend``): empty text blocks, and a thinking block split from the turn
it belongs to."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.protocols.anthropic_lift import (
    lift_assistant,
    lift_system,
    lift_system_message,
    lift_user_run,
)
from proxy.protocols.anthropic_mend import mend
from proxy.protocols.anthropic_parts import (
    Part,
    State,
    as_list,
    is_text,
    text_block,
    texts,
    user_side,
)
from proxy.protocols.base import TAG, Lowered, opaque_note
from rules.base import Message
from rules.messages import role, text_of

_HIDDEN = frozenset({"thinking", "redacted_thinking"})


class AnthropicAdapter:
    name = "anthropic"

    def lower(self, body: dict[str, Any]) -> Lowered:
        source, repairs = mend(body["messages"])
        first_user = next((i for i, m in enumerate(source) if m.get("role") == "user"), None)
        st = State(source, {}, {}, bool(repairs), first_user)
        out: list[Message] = []
        system = body.get("system")
        if system:
            text = system if isinstance(system, str) else texts(system)
            self._add(st, out, "s", Part(-1, (), {"role": "system", "content": text}))
        for i, m in enumerate(source):
            r = m.get("role")
            content = m.get("content")
            if r == "assistant":
                self._add(st, out, f"{i}", _assistant_part(i, content))
            elif r == "system":
                text = content if isinstance(content, str) else texts(as_list(content))
                self._add(st, out, f"{i}", Part(i, (), {"role": "system", "content": text}))
            elif isinstance(content, str):
                self._add(st, out, f"{i}", Part(i, (), {"role": "user", "content": content}))
                st.user_tags[i] = [f"{i}"]
            else:
                st.user_tags[i] = self._lower_user(st, out, i, as_list(content))
        return Lowered(out, _tools(body.get("tools")), repairs, st)

    @staticmethod
    def _add(st: State, out: list[Message], tag: str, part: Part) -> None:
        part.lowered[TAG] = tag
        st.parts[tag] = part
        out.append(part.lowered)

    def _lower_user(self, st: State, out: list[Message], i: int, blocks: list[Any]) -> list[str]:
        tags: list[str] = []
        run: list[int] = []

        def flush() -> None:
            if run:
                tag = f"{i}.{run[0]}"
                self._add(st, out, tag, Part(i, tuple(run), {"role": "user",
                          "content": _user_content([blocks[j] for j in run])}))  # fmt: skip
                tags.append(tag)
                run.clear()

        for j, b in enumerate(blocks):
            if isinstance(b, dict) and b.get("type") == "tool_result":
                flush()
                tag = f"{i}.{j}"
                msg: Message = {"role": "tool", "tool_call_id": b.get("tool_use_id"),
                                "content": text_of(b.get("content"))}  # fmt: skip
                if b.get("is_error") is True:
                    msg["is_error"] = True
                self._add(st, out, tag, Part(i, (j,), msg))
                tags.append(tag)
            else:
                run.append(j)
        flush()
        return tags

    def lift(
        self, body: dict[str, Any], lowered: Lowered, messages: list[Message]
    ) -> dict[str, Any]:
        st: State = lowered.state
        if messages is lowered.messages and not st.mended:
            return body
        out: list[Any] = []
        system = body.get("system")
        k = 0
        while k < len(messages):
            m = messages[k]
            r = role(m)
            if m.get(TAG) == "s":
                system = lift_system(body.get("system"), st.parts["s"], m)
                k += 1
            elif r == "assistant":
                out.append(lift_assistant(st, m))
                k += 1
            elif r in ("system", "developer"):
                out.append(lift_system_message(st, m))
                k += 1
            else:
                end = k
                while end < len(messages) and user_side(messages[end]):
                    end += 1
                out.extend(lift_user_run(st, messages[k:end]))
                k = max(end, k + 1)
        forwarded = dict(body)
        forwarded["messages"] = out
        if system is not body.get("system"):
            forwarded["system"] = system
        return forwarded

    def hidden_text(self, body: dict[str, Any]) -> dict[str, str]:
        texts: list[str] = []
        for m in body.get("messages") or []:
            content = m.get("content") if isinstance(m, dict) else None
            for b in content if isinstance(content, list) else []:
                if isinstance(b, dict) and b.get("type") in _HIDDEN:
                    value = b.get("thinking") or b.get("data")
                    if isinstance(value, str):
                        texts.append(value)
        return {"thinking": "\n".join(texts)} if texts else {}


def _user_content(blocks: list[Any]) -> Any:
    """A user part's lowered content: a string for one text block, else parts (text kept,
    other blocks by type only: the rules read text)."""
    if len(blocks) == 1 and is_text(blocks[0]) and isinstance(blocks[0].get("text"), str):
        return blocks[0]["text"]
    return [
        text_block(b["text"]) if is_text(b) and isinstance(b.get("text"), str)
        else {"type": b.get("type") if isinstance(b, dict) else "unknown"}
        for b in blocks
    ]  # fmt: skip


def _assistant_part(i: int, content: Any) -> Part:
    if isinstance(content, str):
        return Part(i, (), {"role": "assistant", "content": content})
    blocks = as_list(content)
    calls: list[tuple[int, dict[str, Any]]] = []
    for j, b in enumerate(blocks):
        if isinstance(b, dict) and b.get("type") == "tool_use":
            arguments = orjson.dumps(b.get("input", {})).decode()
            fn = {"name": b.get("name"), "arguments": arguments}
            calls.append((j, {"id": b.get("id"), "type": "function", "function": fn}))
    text = texts(blocks)
    if not text and not calls and blocks:
        text = opaque_note([b.get("type") for b in blocks if isinstance(b, dict)])
    msg: Message = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        msg["tool_calls"] = [c for _, c in calls]
    return Part(i, tuple(range(len(blocks))), msg, calls)


def _tools(tools: Any) -> list[Any] | None:
    """The tools as the rules read them (functions with parameters); others by name only."""
    if not isinstance(tools, list):
        return None
    out: list[Any] = []
    for t in tools:
        if not isinstance(t, dict):
            continue
        fn: dict[str, Any] = {"name": t.get("name")}
        if "description" in t:
            fn["description"] = t["description"]
        if "input_schema" in t:
            fn["parameters"] = t["input_schema"]
        out.append({"type": "function", "function": fn})
    return out


ANTHROPIC = AnthropicAdapter()
