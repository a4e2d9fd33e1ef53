"""The previous request of each session, kept so the next one reuses what was derived from the
messages they share (the Anthropic adapter's lowerings and liftings). An agent resends its whole
conversation with every request, two messages longer than the last: walking the ~400 messages
both share one by one (a lookup, a copy, a lifting each) costs more than the rules themselves.

Reuse is proven, never trusted: a client message counts as shared only when its bytes
(``orjson.dumps``, key order and types included) equal the previous request's at the same index,
and a lifting only when the rules' output messages it stands for have the previous request's
content hashes and its client messages are shared. What is kept is immutable once kept (a request
builds its own snapshot from slices of the previous one), so a race only loses a reuse.

Bounded by sessions (LRU) and by the bytes each snapshot is charged (its messages' bytes and a
per-message overhead); a session's snapshot is replaced by its next request's."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

# What a snapshot holds per client message beyond its bytes (its lowering's tuples and lists, the
# liftings' plan and facts; most of it shared with the kept lowerings), charged to the bound.
PER_MESSAGE_BYTES = 256


class PrefixMemory:
    """session key -> the snapshot of its last request (any immutable value with a ``cost``)."""

    def __init__(self, max_sessions: int = 256, max_bytes: int = 48_000_000) -> None:
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self._slots: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def get(self, key: Hashable) -> Any | None:
        hit = self._slots.get(key)
        return None if hit is None else hit[0]

    def put(self, key: Hashable, snapshot: Any, cost: int) -> None:
        """Keep ``snapshot`` (never changed afterwards) as ``key``'s last request, charged
        ``cost`` bytes; one over a quarter of the bound is not kept (the old one goes)."""
        with self._lock:
            old = self._slots.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if cost > self.max_bytes // 4:
                return
            self._slots[key] = (snapshot, cost)
            self._bytes += cost
            while self._slots and (
                self._bytes > self.max_bytes or len(self._slots) > self.max_sessions
            ):
                _, (_, dropped) = self._slots.popitem(last=False)
                self._bytes -= dropped
