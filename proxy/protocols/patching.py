"""Writing a changed text back onto the client's own blocks or parts, keeping what is theirs.

A lowered text stands for one or more text blocks (Anthropic ``text``, Responses ``input_text`` /
``output_text``). When the rules changed it, the change goes back with the least disturbance:
- an appended text (inject's block, a note) becomes a block of its own after the client's, so
  their bytes and any ``cache_control`` on them stay as sent;
- a replaced text (an elided result, clipped prose) takes the first text block's place, with
  that block's other keys; the other text blocks go; non-text blocks stay where they were."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Block = dict[str, Any]
NewBlock = Callable[[str], Block]


def appended(old: str, new: str) -> str | None:
    """What ``new`` adds after ``old``, without the separating blank line, when it only adds."""
    if len(new) > len(old) and new.startswith(old):
        return new[len(old) :].lstrip("\n")
    return None


def patch_blocks(
    blocks: list[Any], old: str, new: str, is_text: Callable[[Any], bool], make: NewBlock
) -> list[Any]:
    """``blocks`` (the client's) with their text changed from ``old`` to ``new``."""
    if new == old:
        return blocks
    suffix = appended(old, new)
    if suffix is not None:
        return [*blocks, make(suffix)] if suffix.strip() else blocks
    out: list[Any] = []
    placed = False
    for b in blocks:
        if not is_text(b):
            out.append(b)
        elif not placed:
            placed = True
            if new.strip():
                out.append({**b, "text": new})
    if not placed and new.strip():
        out.append(make(new))
    return out


def patch_parts(
    blocks: list[Any],
    old: list[Any],
    new: list[Any],
    is_text: Callable[[Any], bool],
    make: NewBlock,
) -> list[Any]:
    """``blocks`` lowered part for part as ``old`` (a list content), now ``new``: unchanged parts
    keep their block, changed texts are written into theirs, added text parts become blocks."""
    out: list[Any] = []
    for k, part in enumerate(new):
        text = part.get("text") if isinstance(part, dict) else None
        if k < len(old) and k < len(blocks):
            if part == old[k] or not isinstance(text, str) or not is_text(blocks[k]):
                out.append(blocks[k])
            elif text.strip():
                out.append({**blocks[k], "text": text})
        elif isinstance(text, str) and text.strip():
            out.append(make(text))
    return out
