"""The Anthropic adapter's bookkeeping: what each lowered message stands for in the client's
messages, and small readers of Anthropic content blocks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proxy.protocols.base import TAG
from proxy.protocols.prefix import SharedParts
from rules.base import Message
from rules.messages import role


@dataclass(slots=True)  # one per lowered message of every request
class Part:
    """One lowered message: where it came from in the (mended) client messages."""

    index: int  # messages[index]; -1 for the top-level system
    blocks: tuple[int, ...]  # content block indices (empty: the content is a string)
    lowered: Message
    calls: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (block, call)


Parts = SharedParts[Part]


@dataclass
class State:
    source: list[Any]  # the client's messages, mended
    parts: Parts
    user_tags: dict[int, list[str]]  # a user message's parts, in order
    mended: bool
    first_user: int | None = None  # the first user message's index (kept as sent)
    # each client message's bytes, where known (the key of its kept lowering): they key the
    # kept liftings of what the rules changed in it
    data: list[bytes | None] = field(default_factory=list)
    # each client message's facts for the final check, where kept with its lowering
    facts: list[Any] = field(default_factory=list)
    # how many client messages are the session's previous request's (``prefix``), its snapshot,
    # and this request's (None: not kept)
    shared: int = 0
    prefix: Any = None
    snapshot: Any = None
    # each client message's ``anthropic_mend.shape`` (empty when mended: they are the sent ones')
    shapes: list[int] = field(default_factory=list)
    # the indexes of the shapes with ``F_HIDDEN`` (a thinking block), in order
    hidden: list[int] = field(default_factory=list)


def is_text(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text"


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def texts(blocks: list[Any]) -> str:
    return "\n\n".join(b["text"] for b in blocks if is_text(b) and isinstance(b.get("text"), str))


def user_side(m: Message) -> bool:
    return role(m) not in ("assistant", "system", "developer") and m.get(TAG) != "s"


def as_list(content: Any) -> list[Any]:
    if isinstance(content, list):
        return content
    return [] if content is None else [text_block(str(content))]
