"""A cache breakpoint on messages a compaction dropped (``prune``'s dropped-turns line stands for
them): the client put it there (a rolling mark on its last user turns), so it goes to that line
instead of vanishing: the request keeps the client's count of breakpoints (never more), and its
cached prefix still ends where those messages were."""

from __future__ import annotations

from typing import Any

from proxy.protocols.anthropic_mend import can_mark
from proxy.protocols.anthropic_parts import State, text_block
from proxy.protocols.base import TAG
from rules.base import Message
from rules.context.overlay import is_rendered
from rules.messages import text_of


def _is_line(m: Message) -> bool:
    return m.get(TAG) is None and m.get("role") == "user" and is_rendered(m)


def _source_index(st: State, m: Message) -> int | None:
    part = st.parts.get(m.get(TAG))  # type: ignore[arg-type]
    return part.index if part is not None and part.index >= 0 else None


def _covered(st: State, ms: list[Message], index: int) -> set[int] | None:
    """The blocks of client message ``index`` that ``ms`` hold (None: all of them)."""
    covered: set[int] = set()
    for m in ms:
        part = st.parts.get(m.get(TAG))  # type: ignore[arg-type]
        if part is not None and part.index == index:
            if not part.blocks:
                return None
            covered.update(part.blocks)
    return covered


def _marks_of(block: Any) -> list[Any]:
    if not isinstance(block, dict):
        return []
    inner = block.get("content") if block.get("type") == "tool_result" else None
    found = [x["cache_control"] for x in inner if isinstance(x, dict) and "cache_control" in x] if (
        isinstance(inner, list)
    ) else []
    return [*found, block["cache_control"]] if "cache_control" in block else found


def dropped_mark(st: State, messages: list[Message], start: int, end: int) -> Any:
    """The last breakpoint the client messages dropped around ``messages[start:end]`` (a user
    run holding a dropped-turns line) held, a message's blocks dropped while others of it stay
    included; None: none (the common case, read at once)."""
    run = messages[start:end]
    if not any(map(_is_line, run)):
        return None
    before = after = None
    lo, hi = start, end  # widened over every message of the client messages on either side
    while lo > 0 and (before is None or _source_index(st, messages[lo - 1]) in (before, None)):
        lo -= 1
        before = _source_index(st, messages[lo]) if before is None else before
    n = len(messages)
    while hi < n and (after is None or _source_index(st, messages[hi]) in (after, None)):
        after = _source_index(st, messages[hi]) if after is None else after
        hi += 1
    first = before if before is not None else 0
    last = after if after is not None else len(st.source) - 1
    near = messages[lo:hi]
    mark = None
    for j in range(first, last + 1):
        src = st.source[j] if 0 <= j < len(st.source) else None
        if not isinstance(src, dict) or not isinstance(src.get("content"), list):
            continue
        covered = _covered(st, near, j)
        if covered is None:
            continue
        for n, b in enumerate(src["content"]):
            if n not in covered:
                mark = next(reversed(_marks_of(b)), mark)
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


def _count(blocks: Any) -> int:
    return sum(len(_marks_of(b)) for b in blocks) if isinstance(blocks, list) else 0


def too_many_marks(body: dict[str, Any], out: list[Any]) -> bool:
    """Whether ``out`` holds more breakpoints than the client's messages did (a dropped block's
    mark carried while a copy of it stayed): Anthropic refuses more than four."""
    sent = body.get("messages") or []
    held = [m.get("content") if isinstance(m, dict) else None for m in sent]
    now = sum(_count(m.get("content")) for m in out if isinstance(m, dict))
    return now > sum(map(_count, held))
