"""The response ids kept in memory (``proxy.server.response_ids``): at most ``per_principal``
ids for each principal (its least recently used going first) and ``total`` in all; past that,
the principal holding most loses its least recently used, never another's while it holds more
than that one. As the other shared maps (``proxy.fair_lru``), a principal no upstream has
accepted is charged to its lane (``proxy.charge_groups``): its lane's principals hold together,
and lose in turn. Before, one LRU for all: one tenant relaying id after id pushed another's few
out, and that one's next continuation paid a store read (on PostgreSQL, with its retries).

Each principal's ids are kept in their own recency order, and who holds most is read from a heap
(stale items skipped, rebuilt past twice the holders), so a hit costs O(1) and a put O(log
holders), with no order across principals kept per id."""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from typing import Generic, TypeVar

from proxy.charge_groups import charged_to

V = TypeVar("V")
_SLACK = 64  # the heap is rebuilt past twice the holders' count and this many items


class _Holder:
    """What one principal, or one lane of principals, holds: how many ids, whose (the next to
    lose first), and when that changed last."""

    __slots__ = ("count", "principals", "version")

    def __init__(self) -> None:
        self.count = 0
        self.principals: dict[str, None] = {}
        self.version = 0


class IdMemory(Generic[V]):
    """(principal, id) -> what is kept of it, bounded per principal and in all, fairly."""

    def __init__(self, per_principal: int, total: int) -> None:
        self.per_principal = per_principal
        self.total = total
        self._by: dict[str, OrderedDict[str, V]] = {}
        self._charged: dict[str, str] = {}  # principal -> whom its ids are charged to
        self._holders: dict[str, _Holder] = {}
        self._heap: list[tuple[int, int, str]] = []  # (-count, version, holder), stale included
        self._count = 0
        self._clock = itertools.count(1)

    def __len__(self) -> int:
        return self._count

    def get(self, principal: str, rid: str) -> V | None:
        ids = self._by.get(principal)
        kept = ids.get(rid) if ids is not None else None
        if ids is not None and kept is not None:
            ids.move_to_end(rid)
        return kept

    def put(self, principal: str, rid: str, kept: V) -> bool:
        """Whether it is new here."""
        ids = self._by.get(principal)
        if ids is None:
            ids = self._by[principal] = OrderedDict()
        holder = self._holder(principal, ids)
        new = rid not in ids
        ids[rid] = kept
        ids.move_to_end(rid)
        if not new:
            return False
        if len(ids) > self.per_principal:
            ids.popitem(last=False)  # its own oldest: its holder's count unchanged
            return True
        self._count += 1
        holder.count += 1
        self._changed(self._charged[principal], holder)
        while self._count > self.total:
            self._evict()
        return True

    def _holder(self, principal: str, ids: OrderedDict[str, V]) -> _Holder:
        """``principal``'s holder, as ``charged_to`` says now (its ids moved, once verified)."""
        now = charged_to(principal)
        was = self._charged.get(principal)
        if was == now:
            return self._holders[now]
        holder = self._holders.get(now)
        if holder is None:
            holder = self._holders[now] = _Holder()
        holder.principals[principal] = None
        self._charged[principal] = now
        if was is not None:
            self._release(was, principal, len(ids))
            holder.count += len(ids)
            self._changed(now, holder)
        return holder

    def _release(self, name: str, principal: str, count: int) -> None:
        holder = self._holders[name]
        del holder.principals[principal]
        holder.count -= count
        if holder.principals:
            self._changed(name, holder)
        else:
            del self._holders[name]

    def _changed(self, name: str, holder: _Holder) -> None:
        holder.version = version = next(self._clock)
        if len(self._heap) > 2 * len(self._holders) + _SLACK:
            self._heap = [(-h.count, h.version, n) for n, h in self._holders.items()]
            heapq.heapify(self._heap)
            return
        heapq.heappush(self._heap, (-holder.count, version, name))

    def _evict(self) -> None:
        """The holder of most loses: a principal its least recently used id, a lane its
        principals' in turn (each its oldest)."""
        heap = self._heap
        while True:
            _, version, name = heap[0]
            holder = self._holders.get(name)
            if holder is not None and holder.version == version:
                break
            heapq.heappop(heap)
        principal = next(iter(holder.principals))
        ids = self._by[principal]
        ids.popitem(last=False)
        self._count -= 1
        if ids:
            del holder.principals[principal]  # its lane's next loss is another's
            holder.principals[principal] = None
            holder.count -= 1
            self._changed(name, holder)
            return
        del self._by[principal], self._charged[principal]
        self._release(name, principal, 1)
