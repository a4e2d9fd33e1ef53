"""A session's state held to bytes, not to counts: what one session may store
(``limits.max_state_bytes``), and the stores' in-memory cache of states, bounded by the bytes its
states take as well as by their number.

Each rule bounds its own namespace (by entries, and call ids and paths by length); the stored
bound is the net under them all. A state whose JSON is over it is stored without its largest
namespaces, largest first, until it fits (the conversation's lineage is always kept): the rules
derive what was left out again from the conversation the next request carries, as they do for a
new branch. The stores check it where they write the state's JSON anyway (SQLite's writer task,
PostgreSQL's save), so a request pays nothing for it.

The cache charges each state ``OBJECT_FACTOR`` times its JSON (a parsed state's objects take a
few times its text); a state saved but not written yet is charged its session's previous size (or
``UNKNOWN_BYTES``) until the writer, within a batch window, says. It is shared by every
principal and evicts fairly (``StateCache``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

import orjson

from proxy.fair_lru import FairLRU
from proxy.principals import split_scoped
from rules.base import SessionState

log = logging.getLogger("ctxproxy.store")

V = TypeVar("V")

DEFAULT_MAX_STATE_BYTES = 2 * 1024 * 1024
# the estimated memory of the states cached, at most (and at most ``DEFAULT_CACHE_ENTRIES``)
DEFAULT_CACHE_BYTES = 128 * 1024 * 1024
DEFAULT_CACHE_ENTRIES = 2_000
OBJECT_FACTOR = 4  # a cached state's objects, per byte of its JSON
UNKNOWN_BYTES = 16 * 1024  # a state's JSON before it was first written or read
KEPT = frozenset({"_lineage"})  # never left out: which conversation the rest belongs to


def stored_state(state: SessionState, max_bytes: int) -> tuple[SessionState, bytes]:
    """The state as stored and its JSON: ``state`` itself when its JSON fits ``max_bytes``, else
    a state without its largest namespaces (logged)."""
    blob = orjson.dumps(state.to_json())
    if len(blob) <= max_bytes:
        return state, blob
    sizes = {ns: len(orjson.dumps(value)) for ns, value in state.data.items() if ns not in KEPT}
    kept = dict(state.data)
    total, dropped = len(blob), []
    for ns in sorted(sizes, key=sizes.__getitem__, reverse=True):
        if total <= max_bytes:
            break
        del kept[ns]
        total -= sizes[ns]
        dropped.append(ns)
    shed = SessionState(kept)
    blob = orjson.dumps(shed.to_json())
    log.warning(
        "session state over %d bytes: stored without %s (the rules derive them again)",
        max_bytes, ", ".join(dropped),
    )  # fmt: skip
    return shed, blob


class StateCache(Generic[V]):
    """session id -> a cached value holding its state, bounded by ``max_entries`` and by
    ``max_bytes`` of estimated memory (``OBJECT_FACTOR`` × each state's JSON); ``state_of``: the
    state a value holds. Evicted fairly (``proxy.fair_lru``): a session id is scoped to its
    principal (``proxy.principals.scoped``), and over a bound the principal holding most loses
    its least recently used, so one tenant's flood of new sessions (or of large states) evicts
    its own, never another tenant's while it holds more than that one."""

    def __init__(
        self,
        state_of: Callable[[V], SessionState],
        max_entries: int = DEFAULT_CACHE_ENTRIES,
        max_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self.state_of = state_of
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items: FairLRU[str, V] = FairLRU(max_entries, max_bytes, keep=1)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    @property
    def held_bytes(self) -> int:
        """The estimated memory of the states held."""
        return self._items.held_bytes

    def get(self, key: str) -> V | None:
        """The value cached for ``key`` (its place in the LRU unchanged)."""
        return self._items.peek(key)

    def touch(self, key: str) -> V | None:
        """``get``, the entry made its principal's most recently used."""
        return self._items.get(key)

    def put(self, key: str, value: V, json_bytes: int | None = None) -> None:
        """Cache ``value``, whose state's JSON is ``json_bytes`` (None: not known yet, charged as
        the entry's previous state was)."""
        if json_bytes is not None:
            charge = OBJECT_FACTOR * json_bytes
        else:
            old = self._items.charge(key)
            charge = old if old is not None else OBJECT_FACTOR * UNKNOWN_BYTES
        self._items.put(key, value, split_scoped(key)[0], charge)

    def written(self, key: str, state: SessionState, stored: V | None, json_bytes: int) -> None:
        """The writer wrote ``state`` for ``key`` as ``json_bytes`` of JSON: the entry, if it
        still holds that very state, is charged so, and replaced by ``stored`` (the state as
        stored, when some of it was left out)."""
        hit = self._items.peek(key)
        if hit is None or self.state_of(hit) is not state:
            return
        value = hit if stored is None else stored
        self._items.put(key, value, split_scoped(key)[0], OBJECT_FACTOR * json_bytes)

    def pop(self, key: str, default: V | None = None) -> V | None:
        hit = self._items.pop(key)
        return default if hit is None else hit
