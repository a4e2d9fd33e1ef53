"""An oversized tool result as prune forwards it when it first caps it (``max_result_tokens``):
its head and tail lines around one marker line with the counts (``overlay``'s ``cap`` edit)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.messages import PLACEHOLDER_PREFIX


def cap_of(edit: Mapping[str, Any], cap: int) -> int:
    """The cap a result was forwarded under: stored with its edit, so a later change of
    ``max_result_tokens`` leaves what was forwarded as it was (an older overlay's: ``cap``)."""
    stored = edit.get("cap")
    if isinstance(stored, str) and stored.isdigit() and int(stored) > 0:
        return int(stored)
    return cap


def capped_text(text: str, tokens: int, limit: int) -> str:
    """Head and tail lines of an oversized result around a marker with the counts.

    Lines are chosen by characters at the text's own characters-per-token ratio, so the cost is
    one pass over the text; the tail gets more room because errors and summaries end outputs."""
    chars_per_token = len(text) / max(tokens, 1)
    head_room = int(limit * 0.35 * chars_per_token)
    tail_room = int(limit * 0.55 * chars_per_token)
    lines = text.split("\n")
    head: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > head_room:
            break
        head.append(line)
        used += len(line) + 1
    tail: list[str] = []
    used = 0
    for line in reversed(lines[len(head) :]):
        if used + len(line) + 1 > tail_room:
            break
        tail.append(line)
        used += len(line) + 1
    tail.reverse()
    if not head and not tail:  # giant lines: cut by characters, and said so
        kept_head, kept_tail = text[:head_room], text[-tail_room:] if tail_room > 0 else ""
        omitted = len(text) - len(kept_head) - len(kept_tail)
        marker = (
            f"{PLACEHOLDER_PREFIX} capped: kept the first {len(kept_head):,} and last "
            f"{len(kept_tail):,} of {len(text):,} characters ({len(lines):,} "
            f"{'line' if len(lines) == 1 else 'lines'}, cut within a line); {omitted:,} "
            f"characters elided, {tokens:,} tokens in all]"
        )
        return "\n".join([kept_head, marker, kept_tail])
    omitted_lines = len(lines) - len(head) - len(tail)
    omitted_chars = len(text) - sum(len(x) for x in head) - sum(len(x) for x in tail)
    marker = (
        f"{PLACEHOLDER_PREFIX} capped: kept the first {len(head)} and last {len(tail)} of "
        f"{len(lines)} lines; {omitted_lines:,} lines ({omitted_chars:,} characters) elided, "
        f"{tokens:,} tokens in all]"
    )
    return "\n".join([*head, marker, *tail])
