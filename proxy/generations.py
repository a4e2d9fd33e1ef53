"""The bound shared by the runner's cross-request caches (``MessageRecords``,
``RenderedMessages``, the Anthropic adapter's ``KeptLowerings``): a dict bounded by bytes, in two
generations. A hit in the older one moves the entry to the newer; when the newer is full, the
older is dropped (an LRU's effect for a plain dict lookup per hit). Thread-safe: lookups read
without the lock (hot paths read ``_young`` directly), writes take it; entries are pure values,
so a race only computes one twice."""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


def compact(data: bytes) -> bytes:
    """``data`` as a cache keeps it: orjson's output keeps its buffer's spare capacity (kilobytes
    for a short message), a copy holds just the bytes."""
    return bytes(memoryview(data))


class Generations(Generic[V]):
    def __init__(self, max_bytes: int) -> None:
        self._young: dict[Hashable, V] = {}
        self._old: dict[Hashable, V] = {}
        self._young_bytes = 0
        self._generation_bytes = max_bytes // 2
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    @property
    def held_bytes(self) -> int:
        """Bytes charged to the newer generation (the older one holds at most as many)."""
        return self._young_bytes

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._young, self._old, self._young_bytes = {}, {}, 0

    def _keep(self, key: Hashable, value: V, cost: int) -> None:
        """``value`` into the newer generation (unless there already), charged ``cost`` bytes.
        One costing more than a generation holds is not kept: it would be one past the bound."""
        if cost > self._generation_bytes:
            return
        with self._lock:
            if key in self._young:
                return
            if self._young_bytes + cost > self._generation_bytes:
                self._old, self._young, self._young_bytes = self._young, {}, 0
            self._young[key] = value
            self._young_bytes += cost
