"""A tool result's non-text blocks (images, documents) through the chain repair, for the adapters
whose chat view reads a result's text only (Anthropic ``tool_result.content``, Responses
``function_call_output.output``): the lowering marks such a result (``rules.messages.MEDIA``, a
digest of those blocks), and the lifting writes back the blocks of the results the repair wrote
into another message (``rules.messages.ABSORBED``: a merged duplicate, orphans as user text)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from rules.base import Message
from rules.messages import ABSORBED, MEDIA


def mark_media(msg: Message, blocks: Any, is_text: Callable[[Any], bool]) -> None:
    """``msg`` (a lowered tool message) marked with a digest of the non-text blocks of its
    result's ``blocks``, when it has any (a digest: the blocks stay out of the chat view)."""
    if not isinstance(blocks, list):
        return
    others = [b for b in blocks if not is_text(b)]
    if not others:
        return
    try:
        data = orjson.dumps(others)
    except TypeError:
        data = repr(others).encode()
    msg[MEDIA] = hashlib.blake2b(data, digest_size=10).hexdigest()


def absorbed_blocks(
    m: Message, blocks_of: Callable[[Message], Any], is_text: Callable[[Any], bool]
) -> list[Any]:
    """The non-text blocks of the results the repair wrote into ``m``, in order. ``blocks_of``:
    a lowered result's blocks in the client's body (None: not found)."""
    absorbed: Iterable[Any] = m.get(ABSORBED) or ()
    out: list[Any] = []
    for a in absorbed:
        blocks = blocks_of(a) if isinstance(a, dict) else None
        if isinstance(blocks, list):
            out.extend(b for b in blocks if not is_text(b))
    return out
