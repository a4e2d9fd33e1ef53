"""Injected blocks as history: once forwarded, a block is replayed on later requests with the same
bytes in the same place, so the provider's prompt cache keeps hitting past it (design section 4).

A block is stored with the anchor of the message it was placed on (``overlay.anchors``: the
message's content hash chained with its predecessor's) and how it was placed: appended to that
message, or as a user message right after it. The client never sends the blocks back (the agent
keeps its own transcript), so each request gets them re-placed on their anchors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rules.base import Context, ListMemo, Message, RenderMemo, content_hash
from rules.context import overlay
from rules.context.inject_text import Sections
from rules.messages import INJECT_CLOSE, append_text, role, shared_prefix, text_of, with_content

NAMESPACE = "inject"
HOSTLESS_MEMO = "inject_hostless"  # ``Context.memo`` name: the last messages seen without a block


class Block(NamedTuple):
    """Immutable; a named tuple because every request loads the stored ones (a frozen
    dataclass costs several times as much to construct)."""

    at: str  # anchor of the message it follows
    where: str  # append | message
    text: str
    tokens: int
    # the stored object it was loaded from: stored again as the very same object, so saving the
    # state never walks (redacts) a forwarded block again, and its bytes stay the forwarded ones
    raw: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        if self.raw is not None:
            return self.raw
        return {"at": self.at, "where": self.where, "text": self.text, "tokens": self.tokens}


@dataclass
class Stored:
    """inject's memory: the blocks forwarded so far, in order, and what they say together."""

    blocks: list[Block] = field(default_factory=list)
    shown: Sections = field(default_factory=Sections)

    @classmethod
    def load(cls, value: Any) -> Stored:
        value = value if isinstance(value, dict) else {}
        blocks = []
        for b in value.get("blocks") or []:
            if isinstance(b, dict) and isinstance(b.get("text"), str):
                at, where, tokens = str(b.get("at")), str(b.get("where")), int(b.get("tokens", 0))
                blocks.append(Block(at, where, b["text"], tokens, b))
        return cls(blocks, Sections.from_json(value.get("shown")))

    def to_json(self) -> dict[str, Any]:
        return {
            "blocks": [b.to_json() for b in self.blocks],
            "shown": self.shown.to_json(),
            "tokens": sum(b.tokens for b in self.blocks),  # read by prune: they count
        }


def tokens_from(ctx: Context, anchors: list[str]) -> list[int] | None:
    """``out[i]``: the tokens of the stored blocks (``ctx.state``) placed on message ``i`` of
    ``anchors`` or after it (one more entry: 0), which a compaction from message ``i`` on takes
    out of the prompt (inject collapses them); None when no block is stored."""
    value = ctx.state.get(NAMESPACE)
    if not stored_tokens(value):
        return None
    index = overlay.anchor_index(ctx, anchors)  # prune's own, once per request
    out = [0] * (len(anchors) + 1)
    for b in Stored.load(value).blocks:
        i = index.get(b.at)
        if i is not None:
            out[i] += b.tokens
    for i in range(len(anchors) - 1, -1, -1):
        out[i] += out[i + 1]
    return out


def stored_tokens(value: Any) -> int:
    """Tokens of the blocks replayed on every request (prune counts them against the budget)."""
    tokens = value.get("tokens") if isinstance(value, dict) else None
    return tokens if isinstance(tokens, int) and tokens > 0 else 0


def _strip_one(message: Message, texts: set[str]) -> tuple[Message, bool]:
    content = message.get("content")
    if isinstance(content, list):
        last = content[-1] if content else None
        if isinstance(last, dict) and last.get("type") == "text" and last.get("text") in texts:
            return with_content(message, content[:-1]), True
        return message, False
    if not isinstance(content, str) or not content.endswith(INJECT_CLOSE):
        return message, False
    for text in texts:
        if content == text:
            return with_content(message, ""), True
        if content.endswith(text) and content[: -len(text)].endswith("\n\n"):
            return with_content(message, content[: -len(text) - 2]), True
    return message, False


def _ends_with_block(content: Any) -> bool:
    if content.__class__ is str:
        return bool(content.endswith(INJECT_CLOSE))
    if isinstance(content, list) and content:
        last = content[-1]
        text = last.get("text") if isinstance(last, dict) else None
        return isinstance(text, str) and text.endswith(INJECT_CLOSE)
    return False


def _first_host(messages: list[Message], start: int = 0) -> int | None:
    """The first message ending with a block (from ``start``): mostly none, as the client never
    sends them back."""
    close = INJECT_CLOSE  # every message of every request: names bound to locals
    for i, m in enumerate(messages[start:], start):
        content = m.get("content")
        if content.__class__ is str:
            if content.endswith(close):
                return i
        elif content.__class__ is list:  # ``_ends_with_block``, inlined
            if content:
                last = content[-1]
                text = last.get("text") if last.__class__ is dict else None
                if text.__class__ is str and text.endswith(close):
                    return i
        elif _ends_with_block(content):
            return i
    return None


def first_host(messages: list[Message], memo: ListMemo | None = None) -> int | None:
    """``_first_host``, past the leading messages of the last list seen without a host that are
    the very same objects (``memo``: ``Context.memo``, kept per session; a message's content never
    changes in place)."""
    kept = memo.get(HOSTLESS_MEMO) if memo is not None else None
    start = shared_prefix(kept[0][0], messages) if kept else 0
    found = _first_host(messages, start)
    if memo is not None:
        memo[HOSTLESS_MEMO] = [(tuple(messages if found is None else messages[:found]), None)]
    return found


def strip(messages: list[Message], texts: set[str], memo: ListMemo | None = None) -> list[Message]:
    """``messages`` without the stored blocks already placed in them (a request that is this
    rule's own output, as when a rule is applied twice): the list placing starts from.
    ``memo``: ``first_host``'s."""
    if not texts:
        return messages
    start = first_host(messages, memo)
    if start is None:
        return messages
    out: list[Message] = messages[:start]
    changed = False
    for m in messages[start:]:
        if not _ends_with_block(m.get("content")):  # every message but a host: one look
            out.append(m)
            continue
        if role(m) == "user" and text_of(m.get("content")) in texts:
            changed = True  # a block sent as a message of its own
            continue
        found = True
        while found:
            m, found = _strip_one(m, texts)
            changed = changed or found
        out.append(m)
    return out if changed else messages


def replay(
    messages: list[Message],
    anchors: Sequence[str],
    blocks: Sequence[Block],
    memo: RenderMemo | None = None,
    hash_of: Callable[[Message], str] = content_hash,
    index: Mapping[str, int] | None = None,
) -> list[Message]:
    """``messages`` with each block placed on its anchor, in stored order. ``memo``
    (``Context.renders``): placings of earlier requests, by the host's hash and the block.
    ``index``: each anchor's position, when the caller has it."""
    by_anchor: dict[str, list[Block]] = {}
    for b in blocks:
        by_anchor.setdefault(b.at, []).append(b)
    if not by_anchor:
        return messages
    if len(anchors) != len(messages):
        raise ValueError("one anchor per message")
    if index is None:
        index = dict(zip(anchors, range(len(anchors)), strict=True))  # anchors are unique
    hosts = sorted((index[a], placed) for a, placed in by_anchor.items() if a in index)
    out = list(messages)
    for i, placed in reversed(hosts):  # from the last: a block of its own shifts what follows
        m = messages[i]
        for b in placed:
            if b.where == "append":
                m = _appended(m, b.text, memo, hash_of)
        out[i] = m
        own = [_own_message(b.text, memo) for b in placed if b.where != "append"]
        if own:
            out[i + 1 : i + 1] = own
    return out


def _appended(
    m: Message, text: str, memo: RenderMemo | None, hash_of: Callable[[Message], str]
) -> Message:
    if memo is None:
        return append_text(m, text)
    key = ("append", hash_of(m), text)
    hit = memo.get(key)
    if hit is None:
        hit = append_text(m, text)
        memo.put(key, hit)
    return hit


def _own_message(text: str, memo: RenderMemo | None) -> Message:
    if memo is None:
        return {"role": "user", "content": text}
    key = ("block", text)
    hit = memo.get(key)
    if hit is None:
        hit = {"role": "user", "content": text}
        memo.put(key, hit)
    return hit
