"""Breaks of Anthropic's own shape, mended before the chat view is made (the chain itself is the
rules' to repair): Anthropic answers 400 to "text content blocks must be non-empty", and with
thinking on, to a turn whose ``tool_use`` lost the thinking block that came before it (a client
or a trimmer that split one assistant turn into two), to a ``tool_use`` without its
``input`` (given ``{}``), and to a ``tool_result`` in a user message that follows another user
message ("each tool_result block must have a corresponding tool_use block in the previous
message": a client that sent each of a turn's results as its own message; the run of user
messages is merged into one, whose results the lowering puts first), and to a ``tool_result``
in an assistant's turn (moved to a user's message where it stood, the turn split around it).
Consecutive assistant messages holding a call before their last are one turn to Anthropic, and
merged into one: lowered apart, the calls' results went between them (``anthropic_runs``). A
``system`` message
inside ``messages`` (accepted, lowered to its text) loses any ``tool_use`` / ``tool_result``
block: no call can be answered, nor a result placed, there; it is no turn, and empty content is
its own (Claude Code empties its environment notice after ``/compact``): not filled. Each mend
is reported as a repair; the messages it does not touch are the client's own objects."""

from __future__ import annotations

from typing import Any

from proxy.protocols.anthropic_runs import (
    block_kind,
    holds_result,
    is_user,
    merged_call_turns,
    merged_result_runs,
    repair,
)

_THINKING = ("thinking", "redacted_thinking")  # tuples: a client's list as a type is no error
_CHAIN = ("tool_use", "tool_result")
EMPTY_TEXT = "(empty)"  # what an emptied message says instead (Anthropic refuses empty content)


# blocks Anthropic takes no ``cache_control`` on
_NO_BREAKPOINT = frozenset({"thinking", "redacted_thinking"})


def without_empty_text(content: list[Any]) -> list[Any]:
    """``content`` without its empty text blocks; a dropped block's ``cache_control`` goes to
    the block before it (or, first, after it) that can carry one and has none: the client's
    breakpoint still ends the cached prefix there, else the request is not cached."""
    kept: list[Any] = []
    pending: Any = None  # a breakpoint dropped before any block could take it
    for b in content:
        if _empty_text(b):
            mark = b.get("cache_control")
            if mark is None:
                continue
            at = next((k for k in range(len(kept) - 1, -1, -1) if can_mark(kept[k])), None)
            if at is not None and "cache_control" not in kept[at]:
                kept[at] = {**kept[at], "cache_control": mark}
            elif at is None and pending is None:
                pending = mark
            continue
        if pending is not None and can_mark(b) and "cache_control" not in b:
            b, pending = {**b, "cache_control": pending}, None
        kept.append(b)
    return kept


def can_mark(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") not in _NO_BREAKPOINT


def _empty_text(block: Any) -> bool:
    if not isinstance(block, dict) or block.get("type") != "text":
        return False
    text = block.get("text")
    return isinstance(text, str) and not text.strip()


def _blank_in_result(block: Any) -> bool:
    """A ``tool_result`` whose content holds an empty or blank text block (a tool's empty
    output): Anthropic reads the blocks inside as it reads a message's."""
    if not isinstance(block, dict) or block.get("type") != "tool_result":
        return False
    inner = block.get("content")
    return isinstance(inner, list) and any(_empty_text(b) for b in inner)


def _result_mended(block: dict[str, Any]) -> dict[str, Any]:
    """``block`` without its blank text blocks; with none left, one saying it was empty (the
    client's breakpoint, if one was dropped, on it)."""
    inner = block["content"]
    kept = without_empty_text(inner)
    if not kept:
        filler: dict[str, Any] = {"type": "text", "text": EMPTY_TEXT}
        marks = [b["cache_control"] for b in inner if "cache_control" in b]
        if marks:
            filler["cache_control"] = marks[-1]
        kept = [filler]
    return {**block, "content": kept}


def _blank(content: Any) -> bool:
    """Empty content, or a string of whitespace only (Anthropic reads a string as one text block:
    "text content blocks must contain non-whitespace text")."""
    if content.__class__ is str:
        # most texts start with a visible character: no strip (a copy) needed
        return not content or (content[0].isspace() and not content.strip())
    return content == []


def _may_be_blank(m: dict[str, Any], last: bool) -> bool:
    """Blank content Anthropic takes: the final assistant turn's (a prefill), and a system
    message's (no turn: Claude Code sends its environment notice emptied after ``/compact``)."""
    role = m.get("role")
    return role == "system" or (last and role == "assistant")


def _thinking_only(message: Any) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(b, dict) and b.get("type") in _THINKING for b in content)
    )


def _no_input(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_use" and "input" not in block


def _chain_block(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in _CHAIN


def _has_chain(content: list[Any]) -> bool:
    return any(_chain_block(b) for b in content)


def _result_in_turn(m: Any) -> bool:
    content = m.get("content") if isinstance(m, dict) and m.get("role") == "assistant" else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def results_out_of_turns(
    messages: list[Any],
) -> tuple[list[Any], list[int], list[dict[str, Any]]]:
    """``messages`` with each ``tool_result`` an assistant's turn holds (Anthropic takes them in
    a user's message only) put in a user's message of its own, where it stood: the turn split
    around it, so a result after the turn's call still answers it. The client's index of each
    message out, and the repairs."""
    out: list[Any] = []
    origin: list[int] = []
    repairs: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if not _result_in_turn(m):
            out.append(m)
            origin.append(i)
            continue
        runs: list[tuple[bool, list[Any]]] = []
        for b in m["content"]:
            result = isinstance(b, dict) and b.get("type") == "tool_result"
            if runs and runs[-1][0] == result:
                runs[-1][1].append(b)
            else:
                runs.append((result, [b]))
        _thinking_to_last_call(runs)
        for result, blocks in runs:
            if not blocks:
                continue
            out.append({"role": "user", "content": blocks} if result else {**m, "content": blocks})
            origin.append(i)
        repairs.append(repair("misplaced_block", i, "moved_result_out_of_assistant_turn"))
    return out, origin, repairs


def _thinking_to_last_call(runs: list[tuple[bool, list[Any]]]) -> None:
    """A split turn's leading thinking blocks moved to the start of its last piece holding a
    call, when that is a later piece: with thinking on, Anthropic refuses a final assistant
    message (the one whose calls the last results answer) that does not start with thinking,
    and lets an earlier one go without."""
    pieces = [blocks for result, blocks in runs if not result]
    calls = [p for p in pieces if any(block_kind(b) == "tool_use" for b in p)]
    if len(pieces) < 2 or not calls or calls[-1] is pieces[0]:
        return
    lead = 0
    while lead < len(pieces[0]) and block_kind(pieces[0][lead]) in _THINKING:
        lead += 1
    if lead:
        calls[-1][:0] = pieces[0][:lead]
        del pieces[0][:lead]


def mend(messages: list[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    """The messages with Anthropic's own breaks mended, and the repairs made (indices are the
    client's). The list is ``messages`` itself when nothing needed mending."""
    if not needs_mending([shape(m) for m in messages]):
        return messages, []
    messages, moved, repairs = results_out_of_turns(messages)
    messages, merged, merges = merged_result_runs(messages)
    origin = [moved[j] for j in merged]
    repairs += [{**r, "index": moved[r["index"]]} for r in merges]
    messages, joined, joins = merged_call_turns(messages)
    repairs += [{**r, "index": origin[r["index"]]} for r in joins]
    origin = [origin[j] for j in joined]
    out: list[Any] = []
    carried: list[Any] = []  # thinking blocks waiting for the turn they belong to
    last = len(messages) - 1
    for at, m in enumerate(messages):
        i = origin[at]
        if not isinstance(m, dict):
            out.append(m)
            continue
        if carried and m.get("role") == "assistant":
            content = m.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            m = {**m, "content": carried + without_empty_text(blocks)}
            carried = []
            repairs.append(repair("thinking_rejoined", i, "moved_thinking_into_turn"))
        elif carried:  # no turn followed: the thinking stays where it was
            out.append({"role": "assistant", "content": carried})
            carried = []
        if (
            m.get("role") == "assistant"
            and at < last
            and _thinking_only(m)
            and isinstance(messages[at + 1], dict)
            and messages[at + 1].get("role") == "assistant"
        ):
            carried = list(m["content"])
            continue
        content = m.get("content")
        if isinstance(content, list) and any(_no_input(b) for b in content):
            content = [{**b, "input": {}} if _no_input(b) else b for b in content]
            m = {**m, "content": content}
            repairs.append(repair("tool_use_without_input", i, "filled_empty_input"))
        if m.get("role") == "system" and isinstance(content, list) and _has_chain(content):
            content = [b for b in content if not _chain_block(b)]
            m = {**m, "content": content}
            repairs.append(repair("misplaced_block", i, "dropped_call_or_result_from_system"))
        if isinstance(content, list) and any(_blank_in_result(b) for b in content):
            content = [_result_mended(b) if _blank_in_result(b) else b for b in content]
            m = {**m, "content": content}
            repairs.append(repair("empty_text_block", i, "dropped_empty_text_in_result"))
        if isinstance(content, list) and any(_empty_text(b) for b in content):
            kept = without_empty_text(content)
            marks = [b["cache_control"] for b in content if "cache_control" in b]
            # emptied: a system message as the client empties one, unless a breakpoint needs a
            # block to stay on
            emptied = _may_be_blank(m, at == last) and not (marks and m.get("role") == "system")
            if kept or emptied:
                m = {**m, "content": kept}
            else:
                filler: dict[str, Any] = {"type": "text", "text": EMPTY_TEXT}
                if marks:  # the client's breakpoint stays on the turn
                    filler["cache_control"] = marks[-1]
                m = {**m, "content": [filler]}
            repairs.append(repair("empty_text_block", i, "dropped_empty_text"))
        elif _blank(content) and not _may_be_blank(m, at == last):
            m = {**m, "content": EMPTY_TEXT}
            repairs.append(repair("empty_text_block", i, "filled_empty_message"))
        out.append(m)
    if carried:
        out.append({"role": "assistant", "content": carried})
    return out, repairs


# What ``mend`` needs to know of one message, as bit flags (a pure function of the message, so
# an adapter can keep it with the message's lowering)
F_EMPTY, F_EMPTY_TEXT, F_THINKING_ONLY, F_ASSISTANT, F_CHAIN_IN_SYSTEM = 1, 2, 4, 8, 16
# not a break: the message holds a thinking or redacted thinking block (``hidden_text`` reads
# only those messages)
F_HIDDEN = 32
F_NO_INPUT = 64  # a ``tool_use`` without its ``input`` (Anthropic requires one)
F_USER = 128  # a user's message
F_RESULT = 256  # a user's message holding a ``tool_result`` (a break after another user's)
F_RESULT_IN_TURN = 512  # an assistant's turn holding a ``tool_result``
F_CALLS = 1024  # an assistant's turn holding a ``tool_use`` (a break before another assistant's)
_BREAKS = (F_EMPTY | F_EMPTY_TEXT | F_THINKING_ONLY | F_CHAIN_IN_SYSTEM | F_NO_INPUT | F_RESULT
           | F_RESULT_IN_TURN | F_CALLS)  # fmt: skip


def shape(m: Any) -> int:
    """``m``'s flags: empty content, an empty text block, only thinking, an assistant's, a
    system message holding a call or a result, a thinking block."""
    if not isinstance(m, dict):
        return 0
    flags = F_ASSISTANT if m.get("role") == "assistant" else F_USER if is_user(m) else 0
    if holds_result(m):
        flags |= F_RESULT
    elif _result_in_turn(m):
        flags |= F_RESULT_IN_TURN
    content = m.get("content")
    if _blank(content):
        # a system message is no turn: Claude Code empties its notice after ``/compact``
        return flags if m.get("role") == "system" else flags | F_EMPTY
    if isinstance(content, list):
        if m.get("role") == "system" and _has_chain(content):
            flags |= F_CHAIN_IN_SYSTEM
        for b in content:
            if not isinstance(b, dict):
                continue
            kind = b.get("type")
            if kind == "text":
                text = b.get("text")
                # most texts start with a visible character: no strip (a copy) needed
                if isinstance(text, str) and (not text or text[0].isspace()) and not text.strip():
                    flags |= F_EMPTY_TEXT
            elif kind == "tool_use":
                if flags & F_ASSISTANT:
                    flags |= F_CALLS
                if "input" not in b:
                    flags |= F_NO_INPUT
            elif kind == "tool_result" and _blank_in_result(b):
                flags |= F_EMPTY_TEXT
        if any(isinstance(b, dict) and b.get("type") in _THINKING for b in content):
            flags |= F_HIDDEN
            if _thinking_only(m):
                flags |= F_THINKING_ONLY
    return flags


def needs_mending(shapes: list[int], start: int = 0) -> bool:
    """Whether ``mend`` has anything to do, from each message's ``shape``. ``start``: the
    messages before it are known sound, each with its next one (a previous request's prefix that
    needed nothing, less its last message, whose next one may be new)."""
    last = len(shapes) - 1
    for i in range(start, len(shapes)):
        flags = shapes[i]
        if not flags & _BREAKS:
            continue
        if flags & (F_EMPTY_TEXT | F_CHAIN_IN_SYSTEM | F_NO_INPUT | F_RESULT_IN_TURN):
            return True
        if flags & F_EMPTY and not (i == last and flags & F_ASSISTANT):
            return True
        if flags & F_RESULT and i > 1 and shapes[i - 1] & F_USER:
            return True  # (``mend`` then merges only a run after a model's turn)
        split_turn = i < last and shapes[i + 1] & F_ASSISTANT
        if flags & F_ASSISTANT and split_turn and flags & (F_THINKING_ONLY | F_CALLS):
            return True
    return False
