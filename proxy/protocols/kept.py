"""Lowerings kept across requests (the Anthropic adapter's). An agent resends the same messages
with every request, each time as new objects: the adapter looks each client message up by its
serialised bytes (and its position, which its provenance tag names) and, on a hit, hands out
what it lowered last time (the same objects: the runner's per-object memos of the session know
them), with its bytes for the runner's records.

Bounded by bytes in two generations (``proxy.generations``); entries are never changed
once kept (nothing changes a lowering in place), so a race only lowers a message twice."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import orjson

from proxy.generations import Generations, compact
from rules.memo_scope import memo_scope

# What an entry holds beyond the bytes charged for it (its tuples, Part specs, dicts), so the
# bound holds for traffic of many short messages too.
ENTRY_OVERHEAD_BYTES = 768


class KeptLowerings(Generations[tuple[Any, int, Hashable]]):
    """Each entry: the lowering, the bytes it is charged, and the key it was kept under (a
    compact copy, used again when a hit moves it to the newer generation: the caller's key holds
    orjson's output, whose buffer keeps its spare capacity)."""

    def __init__(self, max_bytes: int = 24_000_000, max_key_bytes: int = 262_144) -> None:
        super().__init__(max_bytes)
        self.max_key_bytes = max_key_bytes

    def get(self, key: Hashable) -> Any | None:
        """The lowering kept for ``key`` in the principal's own entries (``rules.memo_scope``)."""
        key = (memo_scope(), key)
        hit = self._young.get(key)
        if hit is not None:
            return hit[0]
        hit = self._old.get(key)
        if hit is None:
            return None
        self._keep(hit[2], hit, hit[1])  # used again: into the newer generation
        return hit[0]

    def put(self, data: bytes, position: int, entry: Any, cost: int) -> None:
        """Keep ``entry`` (never changed afterwards) for the message serialised as ``data`` at
        ``position`` (looked up as ``(data, position)``), charged its bytes, ``cost`` more and
        ``ENTRY_OVERHEAD_BYTES``."""
        charged = len(data) + cost + ENTRY_OVERHEAD_BYTES
        key = (memo_scope(), (compact(data), position))
        self._keep(key, (entry, charged, key), charged)


def sorted_bytes(message: dict[str, Any]) -> bytes | None:
    """A lowered message's bytes with sorted keys, kept with it for the runner's records (None:
    not JSON). The message itself is kept as it is and handed to each request: nothing changes a
    lowering in place (the strict engine of the tests checks after every request)."""
    try:
        return compact(orjson.dumps(message, option=orjson.OPT_SORT_KEYS))
    except TypeError:
        return None
