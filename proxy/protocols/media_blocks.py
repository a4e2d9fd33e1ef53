"""A tool result's non-text blocks (images, documents) through the chain repair, for the adapters
whose chat view reads a result's text only (Anthropic ``tool_result.content``, Responses
``function_call_output.output``): the lowering marks such a result (``rules.messages.MEDIA``, a
digest of those blocks, and their estimated tokens, ``MEDIA_TOKENS``, for the proxy's count), and
the lifting writes back the blocks of the results the repair wrote into another message
(``rules.messages.ABSORBED``: a merged duplicate, orphans as user text) and leaves out those of a
result the rules elided."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from rules.base import Message
from rules.media import media_tokens
from rules.messages import ABSORBED, MEDIA, MEDIA_TOKENS


def mark_media(
    msg: Message,
    blocks: Any,
    is_text: Callable[[Any], bool],
    estimate: Callable[[list[Any]], int] = media_tokens,
) -> None:
    """``msg`` (a lowered tool message) marked with a digest of the non-text blocks of its
    result's ``blocks``, when it has any (a digest: the blocks stay out of the chat view), and
    with their tokens as ``estimate`` puts them (the providers' figures, ``rules.media``)."""
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
    msg[MEDIA_TOKENS] = estimate(others)


def media_elided(m: Message, lowered: Message) -> bool:
    """Whether the rules elided the result ``lowered`` marked as holding other blocks: ``m``, the
    message they wrote for it, no longer has the mark (an elision takes it off). Its blocks then
    stay out of the result written back."""
    return MEDIA in lowered and MEDIA not in m


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
