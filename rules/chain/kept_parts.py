"""What the chain repair keeps of a tool result besides its text, in what it writes from it (a
duplicate merged into the first result, orphans kept as user text): the non-text parts of a list
content (images, files), in order, and the results whose other blocks only their adapter holds
(``rules.messages.MEDIA``), listed under ``ABSORBED`` for it to write back."""

from __future__ import annotations

from typing import Any

from rules.base import Message
from rules.chain.text import orphan_text
from rules.messages import (
    ABSORBED,
    MEDIA,
    ORPHANS,
    SOURCE_TAG,
    append_text,
    text_of,
    with_content,
)

# What tells two results of one call apart: their text, their non-text parts, their MEDIA digest
Identity = tuple[str, list[Any], Any]


def non_text(content: Any) -> list[Any]:
    """The parts of a list content that are not text, in order."""
    if not isinstance(content, list):
        return []
    return [p for p in content if not isinstance(p, str) and not _is_text(p)]


def _is_text(part: Any) -> bool:
    return isinstance(part, dict) and isinstance(part.get("text"), str)


def identity(m: Message) -> Identity:
    content = m.get("content")
    return text_of(content), non_text(content), m.get(MEDIA)


def merged(t: Message, dup: Message, note: str, parts: list[Any]) -> Message:
    """``t`` with another result of its call (``dup``) after it: ``note`` (a line saying so, and
    the text), then its non-text ``parts``; named under ``ABSORBED`` when its adapter holds more."""
    if parts:
        content = t.get("content")
        head = content if isinstance(content, list) else _as_parts(text_of(content))
        t = with_content(t, [*head, {"type": "text", "text": note}, *parts])
    else:
        t = append_text(t, note)
    if dup.get(MEDIA) is not None:
        t = {**t, ABSORBED: [*(t.get(ABSORBED) or ()), dup]}
    return t


def orphans_message(orphans: list[Message], late: bool = False) -> Message:
    """Results whose call is gone (``late``: answered by later turns) as one user message: their
    texts (a string, as long as none has non-text parts), each followed by its non-text parts."""
    if not any(non_text(m.get("content")) for m in orphans):
        texts = (orphan_text(m, late) for m in orphans)
        out: Message = {"role": "user", "content": "\n\n".join(texts)}
    else:
        content: list[Any] = []
        for m in orphans:
            content.append({"type": "text", "text": orphan_text(m, late)})
            content.extend(non_text(m.get("content")))
        out = {"role": "user", "content": content}
    absorbed = [m for m in orphans if m.get(MEDIA) is not None]
    if absorbed:
        out[ABSORBED] = absorbed
    lowered = [m for m in orphans if SOURCE_TAG in m]  # by an adapter: it reads them back
    if lowered:
        out[ORPHANS] = lowered
    return out


def _as_parts(text: str) -> list[Any]:
    return [{"type": "text", "text": text}] if text else []
