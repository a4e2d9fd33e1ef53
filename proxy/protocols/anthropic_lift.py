"""Lifting the rules' edits back onto Anthropic messages (see ``anthropic``): an untouched
message is the client's own object; a changed one is patched block by block; tool results go
first in the user message after their call."""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any

import orjson

from proxy.protocols import exact_json
from proxy.protocols.anthropic_mend import can_mark
from proxy.protocols.anthropic_parts import Part, State, as_list, is_text, text_block
from proxy.protocols.base import TAG
from proxy.protocols.media_blocks import absorbed_blocks, media_elided
from proxy.protocols.patching import (
    appended,
    matched_by_id,
    patch_joined,
    patch_parts,
    patch_texts,
)
from rules.base import Message
from rules.messages import ABSORBED, ORPHANS, PLACEHOLDER_PREFIX, role, text_of, tool_calls


def _unchanged(st: State, m: Message) -> Part | None:
    part = st.parts.get(m.get(TAG))  # type: ignore[arg-type]
    if part is not None and (m is part.lowered or m == part.lowered):
        return part
    return None


def lift_system(system: Any, part: Part, m: Message) -> Any:
    if m is part.lowered or m == part.lowered:
        return system
    new = text_of(m.get("content"))
    if isinstance(system, str):
        return new
    return patch_joined(as_list(system), part.lowered["content"], new, is_text, text_block)


def lift_system_message(st: State, m: Message) -> Any:
    part = st.parts.get(m.get(TAG))  # type: ignore[arg-type]
    if part is None:  # one the rules wrote: Anthropic takes it as a system message too
        return {"role": "system", "content": text_of(m.get("content"))}
    src = st.source[part.index]
    if m is part.lowered or m == part.lowered:
        return src
    new = text_of(m.get("content"))
    content = src.get("content")
    if isinstance(content, str):
        return {**src, "content": new}
    blocks = patch_joined(as_list(content), part.lowered["content"], new, is_text, text_block)
    return {**src, "content": blocks}


def lift_assistant(st: State, m: Message) -> Any:
    part = st.parts.get(m.get(TAG))  # type: ignore[arg-type]
    calls = tool_calls(m)
    if part is None:  # written by the rules
        blocks: list[Any] = []
        text = text_of(m.get("content"))
        if text.strip():
            blocks.append(text_block(text))
        blocks.extend(_tool_use(c) for c in calls)
        return {"role": "assistant", "content": blocks or [text_block("(no content)")]}
    src = st.source[part.index]
    if m is part.lowered or m == part.lowered:
        return src
    old_text, new_text = text_of(part.lowered.get("content")), text_of(m.get("content"))
    if old_text.startswith(PLACEHOLDER_PREFIX) and new_text.startswith(PLACEHOLDER_PREFIX):
        new_text = old_text  # the note standing for blocks the rules cannot read: never lifted
    content = src.get("content")
    if isinstance(content, str) and not calls:
        return {**src, "content": new_text}
    blocks = as_list(content)
    matched = _match_calls(part.calls, calls)
    at = {id(b): j for j, b in enumerate(blocks)}  # the calls' blocks, kept as objects below
    suffix = appended(old_text, new_text)
    if new_text == old_text:
        patched = blocks
    elif suffix is not None or not any(is_text(b) for b in blocks):
        # text the source had none of, or a note: a block of its own after the texts, before
        # the calls
        added = new_text if suffix is None else suffix
        last = max((j for j, b in enumerate(blocks) if is_text(b)), default=-1)
        if last < 0:
            last = next((j for j, b in enumerate(blocks) if _kind(b) == "tool_use"), len(blocks))
            last -= 1
        new_blocks = [text_block(added)] if added.strip() else []
        patched = [*blocks[: last + 1], *new_blocks, *blocks[last + 1 :]]
    else:  # each text block edited in its place, with its keys
        patched = patch_joined(blocks, old_text, new_text, is_text, text_block)
    out: list[Any] = []
    for b in patched:
        if _kind(b) == "tool_use" and id(b) in at:
            call = matched.get(at[id(b)])
            if call is not None:
                out.append(_patched_tool_use(b, call))
        else:
            out.append(b)
    known = {id(c) for c in matched.values()}
    out.extend(_tool_use(c) for c in calls if id(c) not in known)
    return {**src, "content": out or [text_block("(no content)")]}


_RESULT_ONLY = frozenset({"tool_reference"})  # blocks valid in a tool_result's content only


def _kind(block: Any) -> Any:
    return block.get("type") if isinstance(block, dict) else None


def _match_calls(
    lowered: list[tuple[int, dict[str, Any]]], calls: list[dict[str, Any]]
) -> dict[int, dict[str, Any]]:
    """Source block index -> the output call standing for it: by position when the rules kept
    every call (a repaired id still maps), else by id, each output call standing for one block
    (a runaway turn whose calls share one id keeps one of them, not all)."""
    if len(lowered) == len(calls):
        return {j: c for (j, _), c in zip(lowered, calls, strict=True)}
    return dict(matched_by_id(lowered, calls))


def _patched_tool_use(block: dict[str, Any], call: dict[str, Any]) -> dict[str, Any]:
    fn = call.get("function") or {}
    new_id, arguments = call.get("id"), fn.get("arguments")
    out = block
    if new_id != block.get("id"):
        out = {**out, "id": new_id}
    name = fn.get("name")
    if isinstance(name, str) and name != block.get("name"):  # one the repair filled in
        out = {**out, "name": name}
    if isinstance(arguments, str) and (
        "input" not in block or arguments != orjson.dumps(block.get("input", {})).decode()
    ):  # (Anthropic requires ``input``: one missing is written, ``{}`` or as repaired)
        with contextlib.suppress(orjson.JSONDecodeError):
            out = {**out, "input": exact_json.loads(arguments)}  # integers past 64 bits too
    return out


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    fn = call.get("function") or {}
    try:
        value = exact_json.loads(fn.get("arguments") or "{}")
    except orjson.JSONDecodeError:
        value = {}
    return {"type": "tool_use", "id": call.get("id"), "name": fn.get("name"),
            "input": value if isinstance(value, dict) else {}}  # fmt: skip


def lift_user_run(st: State, run: list[Message]) -> list[Any]:
    """User and tool messages between two assistant turns, back into user messages: each part
    into its own message; every tool result into the run's first message, ahead of the rest."""
    whole = one_untouched_message(st, run)
    if whole is not None:
        return [whole]
    first_src = next((p.index for m in run if (p := st.parts.get(m.get(TAG))) is not None), None)  # type: ignore[arg-type]
    groups: dict[Any, list[Message]] = {}
    tool_key: Any = first_src if first_src is not None else ("new", 0)
    results = False
    for n, m in enumerate(run):
        part = st.parts.get(m.get(TAG))  # type: ignore[arg-type]
        key = tool_key if role(m) == "tool" else part.index if part is not None else ("new", n + 1)
        results = results or role(m) == "tool"
        groups.setdefault(key, []).append(m)
    # the results' message first, the others where they stand (an orphan result the repair
    # made text stays before the user's words after it, as the chat view has it)
    order = sorted(groups, key=lambda g: g != tool_key or not results)
    out: list[Any] = []
    for key in order:
        members = groups[key]
        if key == st.first_user:
            members, added = _first_turn_kept(st, members)
            out.append(_user_message(st, key, members))
            out.extend({"role": "user", "content": [text_block(t)]} for t in added)
        else:
            out.append(_user_message(st, key, members))
    return out


def one_untouched_message(st: State, run: list[Message]) -> Any | None:
    """The client's message itself when ``run`` is all of one user message's parts, in order,
    each the very object lowered (the usual case: nothing to regroup or patch)."""
    part = st.parts.get(run[0].get(TAG))  # type: ignore[arg-type]
    if part is None:
        return None
    tags = st.user_tags.get(part.index)
    if tags is None or len(tags) != len(run):
        return None
    parts = st.parts
    for m, tag in zip(run, tags, strict=True):
        p = parts.get(tag)
        if p is None or m is not p.lowered:
            return None
    return st.source[part.index]


def _first_turn_kept(st: State, members: list[Message]) -> tuple[list[Message], list[str]]:
    """The conversation's first user message is never altered (Claude Code derives a check in
    its system prompt from it): text the rules appended to it goes in a message of its own."""
    kept: list[Message] = []
    added: list[str] = []
    for m in members:
        part = st.parts.get(m.get(TAG))  # type: ignore[arg-type]
        if part is not None and role(m) == "user" and m is not part.lowered:
            old, new = text_of(part.lowered.get("content")), text_of(m.get("content"))
            suffix = appended(old, new)
            if suffix is not None:
                m = part.lowered
                if suffix.strip():
                    added.append(suffix)
        kept.append(m)
    return kept, added


def _user_message(st: State, key: Any, members: list[Message]) -> Any:
    src = st.source[key] if isinstance(key, int) else None
    if src is not None:
        tags = [m.get(TAG) for m in members]
        if tags == st.user_tags.get(key) and all(_unchanged(st, m) for m in members):
            return src
    results: list[Any] = []
    others: list[Any] = []
    for m in members:
        (results if role(m) == "tool" else others).extend(_user_blocks(st, m))
    content = results + others
    if src is None:
        if not results and len(others) == 1 and is_text(others[0]) and len(others[0]) == 2:
            return {"role": "user", "content": others[0]["text"]}  # a text block and no mark
        return {"role": "user", "content": content or [text_block("(no content)")]}
    return {**src, "content": content or [text_block("(no content)")]}


def _user_blocks(st: State, m: Message) -> list[Any]:
    blocks = _blocks_of(st, m)
    mark = _orphans_mark(st, m) if ORPHANS in m else None
    if mark is not None and blocks and can_mark(blocks[-1]) and "cache_control" not in blocks[-1]:
        # the client's breakpoint was on a result the repair made text: it ends the prefix there
        blocks = [*blocks[:-1], {**blocks[-1], "cache_control": mark}]
    return blocks


def _orphans_mark(st: State, m: Message) -> Any:
    """The last cache breakpoint the client put on the results ``m`` was written from."""
    marks = []
    for orphan in m.get(ORPHANS) or ():
        block = _result_block(st, orphan) if isinstance(orphan, dict) else None
        if block is None:
            continue
        inner = block.get("content")
        marks += [
            b["cache_control"]
            for b in as_list(inner)
            if isinstance(b, dict) and "cache_control" in b
        ]
        if "cache_control" in block:
            marks.append(block["cache_control"])
    return marks[-1] if marks else None


def _blocks_of(st: State, m: Message) -> list[Any]:
    part = st.parts.get(m.get(TAG))  # type: ignore[arg-type]
    content = m.get("content")
    if part is None:
        if ABSORBED in m:  # orphan results kept as user text: their images after it
            text = text_of(content)
            head = [text_block(text)] if text.strip() else []
            kept = absorbed_blocks(m, partial(_result_blocks, st), is_text)
            # a tool search's tool references load tools only inside a tool_result: in a user
            # message Anthropic refuses them (the text says what the result was)
            return [*head, *(b for b in kept if _kind(b) not in _RESULT_ONLY)]
        if role(m) == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.get("tool_call_id"),
                                     "content": text_of(content)}  # fmt: skip
            if m.get("is_error") is True:
                block["is_error"] = True
            return [block]
        if isinstance(content, list):
            texts = [p.get("text") for p in content if isinstance(p, dict)]
            return [text_block(t) for t in texts if isinstance(t, str) and t.strip()]
        text = text_of(content)
        return [text_block(text)] if text.strip() else []
    src = st.source[part.index]
    blocks = as_list(src.get("content"))
    mine = [blocks[j] for j in part.blocks] if part.blocks else blocks
    if m is part.lowered or m == part.lowered:
        return mine
    if role(m) == "tool":
        result = mine[0]
        old, new = part.lowered.get("content") or "", text_of(content)
        inner = result.get("content")
        if isinstance(inner, list) and media_elided(m, part.lowered):
            inner = _elided_blocks(inner, new)
        elif isinstance(inner, list):
            inner = patch_texts(inner, old, new, is_text, text_block)
        else:
            inner = new
        if ABSORBED in m:  # duplicates merged into it: their images after their text
            more = absorbed_blocks(m, partial(_result_blocks, st), is_text)
            inner = [*(inner if isinstance(inner, list) else [text_block(inner)]), *more]
        patched = {**result, "content": inner}
        if m.get("tool_call_id") != result.get("tool_use_id"):
            patched["tool_use_id"] = m.get("tool_call_id")
        return [patched]
    old_content = part.lowered.get("content")
    if isinstance(old_content, list) and isinstance(content, list):
        return patch_parts(mine, old_content, content, is_text, text_block)
    old_text = old_content if isinstance(old_content, str) else text_of(old_content)
    return patch_joined(mine, old_text, text_of(content), is_text, text_block)


def _elided_blocks(blocks: list[Any], text: str) -> Any:
    """A result's ``blocks`` elided with their images: its placeholder ``text``, as one text
    block keeping the last ``cache_control`` breakpoint among them (a client's marker is not
    lost with the block it was on)."""
    marks = [b["cache_control"] for b in blocks if isinstance(b, dict) and "cache_control" in b]
    return [{**text_block(text), "cache_control": marks[-1]}] if marks else text


def _result_blocks(st: State, m: Message) -> Any:
    """The client's blocks of the tool result ``m`` was lowered from (None: not one)."""
    result = _result_block(st, m)
    return None if result is None else result.get("content")


def _result_block(st: State, m: Message) -> dict[str, Any] | None:
    """The client's ``tool_result`` block ``m`` was lowered from (None: not one)."""
    part = st.parts.get(m.get(TAG))  # type: ignore[arg-type]
    if part is None or not part.blocks:
        return None
    result = as_list(st.source[part.index].get("content"))[part.blocks[0]]
    return result if isinstance(result, dict) else None
