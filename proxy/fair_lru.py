"""A bounded in-memory map shared by every principal, evicting fairly: over a bound (entries, or
the bytes its entries are charged), the principal holding most (entries, or bytes) loses its
least recently used entry. One tenant's stream of new keys, or of large values, pushes out its
own entries, never another's while it holds more than that one.

Each principal's entries are kept in their own recency order, and who holds most is read from a
heap per bound (stale items skipped as they surface, the heaps rebuilt once they hold more than
twice as many items as principals): a hit costs O(1), a put or an eviction O(log principals)
amortised, never a scan of the entries. Among principals holding equally much, the one whose
holding changed least recently loses first. A passthrough principal no upstream has accepted is
charged to its network's lane (``proxy.charge_groups``): made-up keys holding one entry each
would otherwise each be a principal holding least. Not thread-safe: callers on several threads
lock."""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

from proxy.charge_groups import charged_to

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# the heaps are rebuilt past twice the principals' count and this many items
_SLACK = 64


class _Holding(Generic[K]):
    """What one principal holds: its keys (least recently used first) and their charges."""

    __slots__ = ("bytes", "order", "version")

    def __init__(self) -> None:
        self.order: OrderedDict[K, None] = OrderedDict()
        self.bytes = 0
        self.version = 0  # when its holding last changed (the heaps' items of older ones: stale)


class FairLRU(Generic[K, V]):
    """key -> value, each charged a cost and belonging to a principal; bounded by ``max_entries``
    and (unless None) by ``max_bytes`` of charges. ``keep``: entries never evicted below (the
    one just put, however large, stays cached). ``on_evict``: told of each entry evicted (not of
    one popped or replaced)."""

    def __init__(
        self,
        max_entries: int,
        max_bytes: int | None = None,
        keep: int = 0,
        on_evict: Callable[[K, V], None] | None = None,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.keep = keep
        self.on_evict = on_evict
        self._entries: dict[K, tuple[V, int, str]] = {}  # key -> (value, cost, principal)
        self._held: dict[str, _Holding[K]] = {}
        self._bytes = 0
        # (-entries, version, principal) and (-bytes, version, principal), stale ones included
        self._by_entries: list[tuple[int, int, str]] = []
        self._by_bytes: list[tuple[int, int, str]] = []
        self._clock = itertools.count(1)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def held_by(self, principal: str) -> tuple[int, int]:
        """(entries, bytes) ``principal`` holds."""
        held = self._held.get(principal)
        return (0, 0) if held is None else (len(held.order), held.bytes)

    def __iter__(self) -> Iterator[K]:
        """The keys kept (in no particular order)."""
        return iter(list(self._entries))

    def first(self) -> K | None:
        """The key put longest ago (a replacement keeps its place; put again after a ``pop``, it
        is the newest); None when empty."""
        return next(iter(self._entries), None)

    def values(self) -> Iterator[V]:
        """The values kept (in no particular order)."""
        return (hit[0] for hit in self._entries.values())

    def peek(self, key: K) -> V | None:
        """The value kept for ``key`` (its recency unchanged)."""
        hit = self._entries.get(key)
        return None if hit is None else hit[0]

    def charge(self, key: K) -> int | None:
        """What ``key``'s entry is charged (None: no entry)."""
        hit = self._entries.get(key)
        return None if hit is None else hit[1]

    def get(self, key: K) -> V | None:
        """The value kept for ``key``, made its principal's most recently used."""
        hit = self._entries.get(key)
        if hit is None:
            return None
        self._held[hit[2]].order.move_to_end(key)
        return hit[0]

    def put(self, key: K, value: V, principal: str, cost: int = 0) -> None:
        """Keep ``value`` for ``key`` (replacing what was kept), ``principal``'s, charged
        ``cost``; then evict until within the bounds. An unverified principal's entry is charged
        to its lane (``proxy.charge_groups``)."""
        principal = charged_to(principal)
        hit = self._entries.get(key)
        if hit is not None and hit[2] == principal:
            # a session's value replaced by its own next (the common put): its place and its
            # principal's holding move once, not out and back in
            self._entries[key] = (value, cost, principal)
            own = self._held[principal]
            own.order.move_to_end(key)
            if cost != hit[1]:
                own.bytes += cost - hit[1]
                self._bytes += cost - hit[1]
                self._changed(principal, own)
            self._evict(key)
            return
        self._take(key)
        self._entries[key] = (value, cost, principal)
        held = self._held.get(principal)
        if held is None:
            held = self._held[principal] = _Holding()
        held.order[key] = None
        held.bytes += cost
        self._bytes += cost
        self._changed(principal, held)
        self._evict(key)

    def pop(self, key: K) -> V | None:
        """Drop ``key``'s entry; its value (None: none kept)."""
        return self._take(key)

    def _take(self, key: K) -> V | None:
        hit = self._entries.pop(key, None)
        if hit is None:
            return None
        value, cost, principal = hit
        held = self._held[principal]
        del held.order[key]
        held.bytes -= cost
        self._bytes -= cost
        if held.order:
            self._changed(principal, held)
        else:
            del self._held[principal]
        return value

    def _changed(self, principal: str, held: _Holding[K]) -> None:
        held.version = version = next(self._clock)
        if len(self._by_entries) > 2 * len(self._held) + _SLACK:
            self._rebuild()
            return
        heapq.heappush(self._by_entries, (-len(held.order), version, principal))
        heapq.heappush(self._by_bytes, (-held.bytes, version, principal))

    def _rebuild(self) -> None:
        self._by_entries = [(-len(h.order), h.version, p) for p, h in self._held.items()]
        self._by_bytes = [(-h.bytes, h.version, p) for p, h in self._held.items()]
        heapq.heapify(self._by_entries)
        heapq.heapify(self._by_bytes)

    def _heaviest(self, heap: list[tuple[int, int, str]]) -> str:
        """The principal at the top of ``heap`` once its stale items are gone."""
        while True:
            _, version, principal = heap[0]
            held = self._held.get(principal)
            if held is not None and held.version == version:
                return principal
            heapq.heappop(heap)

    def _evict(self, put: K) -> None:
        """``put``: the key just put, which a ``keep`` floor keeps: when it is the heaviest
        principal's oldest (its only entry, larger than all the others), the oldest of the
        others goes instead."""
        while len(self._entries) > self.keep:
            if len(self._entries) > self.max_entries:
                heap = self._by_entries
            elif self.max_bytes is not None and self._bytes > self.max_bytes:
                heap = self._by_bytes
            else:
                return
            held = self._held[self._heaviest(heap)]
            key = next(iter(held.order))
            if key == put and self.keep:
                key = next(k for k in self._entries if k != put)
            value = self._entries[key][0]
            self._take(key)
            if self.on_evict is not None:
                self.on_evict(key, value)
