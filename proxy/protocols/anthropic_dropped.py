"""A cache breakpoint on messages a compaction dropped (``prune``'s dropped-turns line stands for
them): the client put it there (a rolling mark on its last user turns), so it goes to that line
instead of vanishing: the request keeps the client's count of breakpoints (never more), and its
cached prefix still ends where those messages were."""

from __future__ import annotations

from typing import Any

from proxy.protocols.anthropic_mend import can_mark
from proxy.protocols.anthropic_parts import State, as_list, text_block
from proxy.protocols.base import TAG
from rules.base import Message
from rules.context.overlay import is_rendered
from rules.messages import text_of


def _is_line(m: Message) -> bool:
    return m.get(TAG) is None and m.get("role") == "user" and is_rendered(m)


def _source_index(st: State, m: Message) -> int | None:
    part = st.parts.get(m.get(TAG))  # type: ignore[arg-type]
    return part.index if part is not None and part.index >= 0 else None


def dropped_mark(st: State, messages: list[Message], start: int, end: int) -> Any:
    """The last breakpoint the client messages dropped around ``messages[start:end]`` (a user
    run holding a dropped-turns line) held; None: none (the common case, read at once)."""
    run = messages[start:end]
    if not any(map(_is_line, run)):
        return None
    before = next(
        (i for m in reversed(messages[:start]) if (i := _source_index(st, m)) is not None), -1
    )
    after = next(
        (i for m in messages[end:] if (i := _source_index(st, m)) is not None), len(st.source)
    )
    kept = {i for m in run if (i := _source_index(st, m)) is not None}
    mark = None
    for j in range(before + 1, after):
        if j in kept or not isinstance(st.source[j], dict):
            continue
        for b in as_list(st.source[j].get("content")):
            if not isinstance(b, dict):
                continue
            inner = b.get("content") if b.get("type") == "tool_result" else None
            for x in inner if isinstance(inner, list) else ():
                if isinstance(x, dict) and "cache_control" in x:
                    mark = x["cache_control"]
            if "cache_control" in b:
                mark = b["cache_control"]
    return mark


def marked_line(lifted: list[Any], run: list[Message], mark: Any) -> list[Any]:
    """``lifted`` (the run's messages) with ``mark`` on its dropped-turns line's text, unless
    the message holding it carries a breakpoint already."""
    line = text_of(next(m for m in run if _is_line(m)).get("content"))
    out = list(lifted)
    for n, msg in enumerate(out):
        content = msg.get("content") if isinstance(msg, dict) else None
        if content == line:
            out[n] = {**msg, "content": [{**text_block(line), "cache_control": mark}]}
            return out
        blocks = content if isinstance(content, list) else []
        if any(isinstance(b, dict) and "cache_control" in b for b in blocks):
            continue
        for k, b in enumerate(blocks):
            if can_mark(b) and b.get("type") == "text" and b.get("text") == line:
                out[n] = {**msg, "content": [*blocks[:k], {**b, "cache_control": mark},
                                             *blocks[k + 1 :]]}  # fmt: skip
                return out
    return out
