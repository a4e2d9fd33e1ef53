"""The shrink stage: old assistant turns made small while every call keeps its envelope (its id,
tool name and arguments as valid JSON). Old prose beyond a few lines keeps its first lines and a
placeholder; a large string argument (a superseded write's contents, a heredoc body, a long
script) becomes a short placeholder string inside the JSON: its first line, clipped, and the size
elided. Runs after mask and before drop: the action trail survives where turns would be dropped.

Pure: the same message and parameters give the same bytes (the overlay replays the edit)."""

from __future__ import annotations

from typing import Any

import orjson

from rules.activity.observations import Observation
from rules.base import Message
from rules.messages import (
    PLACEHOLDER_PREFIX,
    call_arguments_text,
    role,
    text_of,
    tool_calls,
    with_content,
)
from rules.redact import redact_text

CLIPPED = f"{PLACEHOLDER_PREFIX} clipped "
ARG_ELIDED = " characters elided]"
_HEAD_CHARS = 80  # of an elided argument's first line
_REDACT_MARGIN = 200  # read past the cut by the redactor: a secret cut there is still known
_SHRUNK_SCAN = 8_000  # arguments longer than this were not shrunk (each string is <= ~130)


def clip_prose(text: str, keep_lines: int, max_chars: int) -> str | None:
    """The first ``keep_lines`` lines (within ``max_chars``) and a placeholder, or None when the
    text is short enough already."""
    lines = text.split("\n")
    if len(lines) <= keep_lines and len(text) <= max_chars:
        return None
    head = "\n".join(lines[:keep_lines])[:max_chars].rstrip()
    rest = len(text) - len(head)
    if rest < 40:  # the placeholder would be as long as what it replaces
        return None
    return f"{head}\n{CLIPPED}{rest:,} more characters of this message]"


def _elided(value: str) -> str:
    first = value.lstrip().split("\n", 1)[0]
    if len(first) > _HEAD_CHARS:  # redacted before the cut, which could hide a secret's shape
        first = redact_text(first[: _HEAD_CHARS + _REDACT_MARGIN])
    head = first if len(first) <= _HEAD_CHARS else first[: _HEAD_CHARS - 1] + "…"
    return f"{head} {PLACEHOLDER_PREFIX} {len(value):,}{ARG_ELIDED}"


def _shrink_value(value: Any, max_chars: int) -> tuple[Any, bool]:
    if isinstance(value, str):
        if len(value) > max_chars:
            return _elided(value), True
        return value, False
    if isinstance(value, dict):
        out, changed = {}, False
        for k, v in value.items():
            out[k], c = _shrink_value(v, max_chars)
            changed = changed or c
        return (out, True) if changed else (value, False)
    if isinstance(value, list):
        items = [_shrink_value(v, max_chars) for v in value]
        if any(c for _, c in items):
            return [v for v, _ in items], True
    return value, False


def shrink_arguments(arguments: str, max_chars: int) -> str | None:
    """The arguments with each string over ``max_chars`` replaced by a placeholder string, still
    valid JSON; None when nothing is that large, or the arguments are not JSON (left alone)."""
    if len(arguments) <= max_chars:
        return None
    try:
        parsed = orjson.loads(arguments)
        shrunk, changed = _shrink_value(parsed, max_chars)
        return orjson.dumps(shrunk).decode() if changed else None
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, RecursionError):
        return None  # not JSON, or nested deeper than orjson writes back (255 levels)


def shrink_message(message: Message, keep_lines: int, max_chars: int) -> Message:
    """``message`` (an assistant turn) with its prose clipped and large arguments elided."""
    out = message
    content = message.get("content")
    if isinstance(content, str):
        clipped = clip_prose(content, keep_lines, max_chars * keep_lines)
        if clipped is not None:
            out = with_content(out, clipped)
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        new_calls, changed = [], False
        for c in calls:
            fn = c.get("function") if isinstance(c, dict) else None
            args = call_arguments_text(c) if isinstance(fn, dict) else ""
            shrunk = shrink_arguments(args, max_chars) if isinstance(args, str) else None
            if shrunk is None or not isinstance(fn, dict):
                new_calls.append(c)
                continue
            new_calls.append({**c, "function": {**fn, "arguments": shrunk}})
            changed = True
        if changed:
            out = {**out, "tool_calls": new_calls}
    return out


def estimate(message: Message, keep_lines: int, max_chars: int) -> int:
    """Tokens ``shrink_message`` would free, estimated from lengths (no parse: this runs often)."""
    chars = 0
    content = message.get("content")
    if isinstance(content, str):
        limit = max_chars * keep_lines
        keep = min(limit, 80 * keep_lines)
        # a text no longer than ``keep`` frees nothing whatever its lines: not counted
        if len(content) > keep and (len(content) > limit or content.count("\n") >= keep_lines):
            chars += len(content) - keep
    if message.get("tool_calls"):  # tool_calls(m): missing, null or empty are none
        for c in tool_calls(message):
            args = call_arguments_text(c)
            if len(args) > max_chars:
                chars += len(args) - max_chars
    return chars // 4


# ``Context.table`` name: each message's ``estimate``, with the options it was made with (kept
# across a session's requests: a look for a compaction asks about every old assistant turn)
ESTIMATE_MEMO = "shrink_estimate"


def estimate_in(
    table: dict[int, tuple[Any, Any]], message: Message, keep_lines: int, max_chars: int
) -> int:
    """``estimate``, once per message object and options (``table``: ``ESTIMATE_MEMO``)."""
    options = (keep_lines, max_chars)
    hit = table.get(id(message))
    if hit is not None and hit[0] is message and hit[1][0] == options:
        return int(hit[1][1])
    gain = estimate(message, keep_lines, max_chars)
    table[id(message)] = (message, (options, gain))
    return gain


def is_shrunk(message: Message) -> bool:
    """Whether ``shrink_message`` wrote this message (a client never sends these markers)."""
    if role(message) != "assistant":
        return False
    if CLIPPED in text_of(message.get("content")):
        return True
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return False
    for c in calls:
        args = call_arguments_text(c) if isinstance(c, dict) else ""
        # shrunk arguments are short: a long text is never scanned (this runs on every message)
        if len(args) <= _SHRUNK_SCAN and ARG_ELIDED in args:
            return True
    return False


def candidates(
    messages: list[Message],
    observations: list[Observation],
    protected: set[int],
    current: int,
    keep_last_turns: int,
) -> list[int]:
    """Assistant messages older than the last ``keep_last_turns`` ones and before the current
    turn (``current``), oldest first, without a call whose result is protected evidence."""
    assistants = [i for i in range(current) if role(messages[i]) == "assistant"]
    older = assistants[: max(0, len(assistants) - keep_last_turns)]
    guarded = {o.call_index for o in observations if o.result_index in protected}
    return [i for i in older if i not in guarded and i not in protected]
