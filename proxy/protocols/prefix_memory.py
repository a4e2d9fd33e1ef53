"""Each session's last request as an adapter keeps it (its snapshot), shared by every principal
and bounded fairly: over a bound, the principal holding most sessions (or bytes) loses its least
recently kept snapshot first (``proxy.fair_lru``)."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from typing import Any

from proxy.fair_lru import FairLRU
from proxy.principals import split_scoped


class PrefixMemory:
    """session key -> the snapshot of its last request (any immutable value with a ``cost``).
    A key is a tuple whose first item is the scoped session (``principal/name``), whose
    principal it is charged to (``session_principal``): over a bound, the principal holding most
    sessions (or bytes) loses its least recently kept first (``fair_lru``)."""

    # 96 MB: a 400-message snapshot is charged ~1.7–2.9 MB, its client messages included (shared
    # with the body memory, which charges them too)
    def __init__(self, max_sessions: int = 256, max_bytes: int = 96_000_000) -> None:
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self._slots: FairLRU[Hashable, Any] = FairLRU(max_sessions, max_bytes)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def held_bytes(self) -> int:
        return self._slots.held_bytes

    def get(self, key: Hashable) -> Any | None:
        return self._slots.peek(key)

    def snapshots(self) -> Iterator[Any]:
        """The snapshots kept (in no particular order)."""
        return self._slots.values()

    def put(self, key: Hashable, snapshot: Any, cost: int) -> None:
        """Keep ``snapshot`` (never changed afterwards) as ``key``'s last request, charged
        ``cost`` bytes; one over a quarter of the bound is not kept (the old one goes)."""
        with self._lock:
            if cost > self.max_bytes // 4:
                self._slots.pop(key)
                return
            self._slots.put(key, snapshot, session_principal(key), cost)


def session_principal(key: Hashable) -> str:
    """The principal of a memory's key: of its first item's scoped session (``principal/name``),
    or of the key itself when it is one ("" for a key that names no session)."""
    first = key[0] if isinstance(key, tuple) and key else key
    return split_scoped(first)[0] if isinstance(first, str) else ""
