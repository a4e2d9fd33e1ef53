"""Lowering one Anthropic client message to the chat view (see ``anthropic``): a pure function of
the message and its index, kept across requests (``kept``) and reused over a session's shared
prefix (``prefix``)."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.protocols.anthropic_mend import shape
from proxy.protocols.anthropic_parts import Part, as_list, is_text, text_block, texts
from proxy.protocols.base import TAG, opaque_note
from proxy.protocols.checks import Facts, kept_facts
from proxy.protocols.kept import sorted_bytes
from proxy.protocols.media_blocks import mark_media
from rules.base import Message
from rules.messages import LOADS_TOOLS, text_of

# One lowered message, as kept: (tag, content block indices, the message (tag included), its
# calls by block, its bytes with sorted keys for the runner's records)
Spec = tuple[str, tuple[int, ...], Message, list[tuple[int, dict[str, Any]]], bytes | None]
# A client message's lowering: its messages, a user message's tags in order, its shape for
# ``anthropic_mend``, its facts for the final check
Lowering = tuple[tuple[Spec, ...], list[str] | None, int, Facts | None]


def _spec(tag: str, part: Part) -> Spec:
    part.lowered[TAG] = tag
    return (tag, part.blocks, part.lowered, part.calls, sorted_bytes(part.lowered))


def lowering(i: int, m: Message) -> Lowering:
    """The chat view of the client's ``messages[i]`` (a pure function of it and ``i``), with what
    the final check reads of it."""
    specs, tags = _lowered(i, m)
    return specs, tags, shape(m), kept_facts(m)


def _lowered(i: int, m: Message) -> tuple[tuple[Spec, ...], list[str] | None]:
    r = m.get("role")
    content = m.get("content")
    if r == "assistant":
        return (_spec(f"{i}", _assistant_part(i, content)),), None
    if r == "system":
        text = content if isinstance(content, str) else texts(as_list(content))
        return (_spec(f"{i}", Part(i, (), {"role": "system", "content": text})),), None
    # a string is lowered as the one text block it stands for: a client that moves its cache
    # mark resends its last turn's block as a string, and the rules must see the same message
    # (its hash anchors the blocks forwarded on it)
    specs = _lower_user(i, as_list(content))
    return specs, [s[0] for s in specs]


def _lower_user(i: int, blocks: list[Any]) -> tuple[Spec, ...]:
    specs: list[Spec] = []
    run: list[int] = []

    def flush() -> None:
        if run:
            content = _user_content([blocks[j] for j in run])
            specs.append(_spec(f"{i}.{run[0]}", Part(i, tuple(run), {"role": "user",
                               "content": content})))  # fmt: skip
            run.clear()

    for j, b in enumerate(blocks):
        if isinstance(b, dict) and b.get("type") == "tool_result":
            flush()
            msg: Message = {"role": "tool", "tool_call_id": b.get("tool_use_id"),
                            "content": text_of(b.get("content"))}  # fmt: skip
            if b.get("is_error") is True:
                msg["is_error"] = True
            mark_media(msg, b.get("content"), is_text)  # its images, for the chain repair
            if _loads_tools(b.get("content"), "tool_reference"):
                msg[LOADS_TOOLS] = True
            specs.append(_spec(f"{i}.{j}", Part(i, (j,), msg)))
        else:
            run.append(j)
    flush()
    return tuple(specs)


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
    if _loads_tools(blocks, "tool_search_tool_result"):  # the server's tool search
        msg[LOADS_TOOLS] = True
    return Part(i, tuple(range(len(blocks))), msg, calls)


def _loads_tools(blocks: Any, kind: str) -> bool:
    """Whether ``blocks`` hold one of ``kind``: tool references, which load deferred tools."""
    if not isinstance(blocks, list):
        return False
    return any(isinstance(b, dict) and b.get("type") == kind for b in blocks)


def lowered_tools(tools: Any) -> list[Any] | None:
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
