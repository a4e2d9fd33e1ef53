"""What the runner keeps across requests, each bounded in bytes: ``MessageRecords`` (what the
pipeline derived from a message's content: hash, token counts, sections, chain checks) and
``RenderedMessages`` (the rules' rendered edits, handed to them as ``Context.renders``). An agent
resends the same messages with every request; these make the second sight of one a lookup."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import orjson

from proxy.generations import Generations, compact
from rules.base import Message, hash_bytes
from rules.memo_scope import memo_scope

# What a record holds beyond its key (its dict, hash, counts and section sizes for up to two
# encodings, validator checks), measured with tracemalloc: charged so the bound holds for
# traffic of many short messages too, not only for the keys.
RECORD_OVERHEAD_BYTES = 640


class MessageRecords(Generations[dict[str, Any]]):
    """What the pipeline derives from a message's content alone, kept across requests: its
    content hash, its token count and section sizes (per encoding), the validator's checks of
    its calls, a tool result's exit code. An agent sends the same messages again with every
    request, each time as new objects; the runner looks each one up once by its serialised
    bytes (sorted keys: exactly what ``content_hash`` hashes, so a hit is the same content),
    hands what is known to the request's memos before the rules run, and keeps what they
    computed afterwards.

    Bounded by bytes (``Generations``; each record is charged its key plus
    ``RECORD_OVERHEAD_BYTES``). A message over ``max_key_bytes`` is never kept."""

    def __init__(self, max_bytes: int = 32_000_000, max_key_bytes: int = 262_144) -> None:
        super().__init__(max_bytes)
        self._max_key_bytes = max_key_bytes

    def lookup(self, data: bytes) -> dict[str, Any]:
        """The record of the message serialised as ``data`` (a new one, holding just its hash, the
        first time), within the principal's own entries (``rules.memo_scope``)."""
        scope = memo_scope()
        record = self._young.get((scope, data))
        if record is not None:
            return record
        record = self._old.get((scope, data))
        if record is None:
            record = {"hash": hash_bytes(data)}
        if len(data) <= self._max_key_bytes:
            self._keep((scope, compact(data)), record, len(data) + RECORD_OVERHEAD_BYTES)
        return record

    def newer(self, datas: Sequence[bytes]) -> list[dict[str, Any] | None]:
        """The records of the newer generation for these messages' bytes (None where none is),
        within the principal's own entries: the lookup most messages of a request end at."""
        scope = memo_scope()
        young = self._young
        return [young.get((scope, d)) for d in datas]


# What an entry of ``RenderedMessages`` holds beyond its message (its key, the entry tuple, its
# record): charged so the bound holds for many small renderings too. The message itself is kept
# as the object the rule rendered, charged ``OBJECT_FACTOR`` times its serialised size (a parsed
# JSON message takes about that in memory, measured with tracemalloc for the body memory).
RENDER_OVERHEAD_BYTES = 512
OBJECT_FACTOR = 3
_Rendering = tuple[Any, dict[str, Any], int]


class RenderedMessages(Generations[_Rendering]):
    """Messages the rules rendered, kept across requests (``Context.renders``): an elided result,
    a shrunk turn, a dropped run's line, a block placed on its host. The overlay replays every
    edit on every request; with this, replaying one that did not change costs a lookup instead of
    rendering it, counting it, hashing it and checking it again.

    A key holds every input of the pure function that rendered its message (rules/base.py's
    ``RenderMemo``), so a hit is that function's answer. Each entry keeps a record, like
    ``MessageRecords``', of what the pipeline derived from the message (hash, token counts and
    sections per encoding, the validator's checks): handed to the request's memos on each hit.
    A hit is the very object rendered first: the same message in every request, so the runner's
    per-object memos of a session know it already. Nothing changes a message in place (the rules
    are pure; every upstream edge serialises what it forwards, and litellm's path parses its own
    copy), which the tests' strict engine checks after every request (``Engine._check``).
    Bounded by bytes like ``MessageRecords`` (two generations); a rendering over
    ``max_entry_bytes`` is never kept. Thread-safe in the same way."""

    def __init__(self, max_bytes: int = 16_000_000, max_entry_bytes: int = 262_144) -> None:
        # key -> (the message, its record, the bytes it is charged)
        super().__init__(max_bytes)
        self._max_entry_bytes = max_entry_bytes

    def get(self, key: Hashable) -> tuple[Message, dict[str, Any]] | None:
        """The message stored for ``key``, and its record; None when unknown. Within the
        principal's own entries (``rules.memo_scope``)."""
        scoped = (memo_scope(), key)
        entry = self._young.get(scoped)
        if entry is None:
            entry = self._old.get(scoped)
            if entry is None:
                return None
            self._keep(scoped, entry, entry[2])  # used again: into the newer generation
        return entry[0], entry[1]

    def put(self, key: Hashable, message: Message) -> dict[str, Any] | None:
        """Keep ``message`` (which the caller goes on using) for ``key``; its new record, or
        None when it is not kept (too large, or not JSON)."""
        try:
            size = len(orjson.dumps(message))
        except TypeError:
            return None
        if size > self._max_entry_bytes:
            return None
        record: dict[str, Any] = {}
        charged = OBJECT_FACTOR * size + RENDER_OVERHEAD_BYTES
        self._keep((memo_scope(), key), (message, record, charged), charged)
        return record
