"""track_entities' keys of the calls it read (its meta's ``seen``, up to ``max_seen_calls``) as a
set, kept per session (``Context.memo``) with the very list the state holds: a tool loop's next
request adds its call's key to the set it left, not a set made again of thousands of keys; and,
as that list was storable, only what the request adds is checked for lone surrogates.

A kept set is the set of its list (the list's keys, no two alike, at most the cap); it is taken
out of the memo while the request changes it, so a request that fails leaves none behind, and a
request that starts from another state (a retry, a branch) makes its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from rules.base import ListMemo

MEMO = "entities_seen"  # ``Context.memo`` name: the list a state holds, and the set of its keys
# What a kept key holds beyond a message's memos: its string, its slot in the list and in the set
# (a set of 5,000 keys is ~525 KB on CPython): charged to the session memos' byte bound.
KEY_BYTES = 200


def held_bytes(memo: Any) -> int:
    """What the set kept in ``memo`` (``Context.memo``'s table) holds, for the memos' bound."""
    kept = memo.get(MEMO) if isinstance(memo, dict) else None
    return KEY_BYTES * len(kept[0][1][1]) if kept else 0


class SeenCalls:
    """The keys read before this request (``stored``, the newest ``cap``) and those it adds."""

    def __init__(self, memo: ListMemo, stored: Any, cap: int) -> None:
        self.memo, self.cap = memo, cap
        kept = memo.pop(MEMO, None)  # the caller's from here on: changed in place
        if kept and kept[0][1][0] is stored and len(stored) <= cap:
            self.stored: Sequence[str] = stored
            self.keys: set[str] = kept[0][1][1]
            self.known = True  # no two keys alike, and storable (it was the state's)
        else:
            self.stored = list(stored or [])[-cap:]
            self.keys = set(self.stored)
            self.known = False
        self.unique = len(self.keys) == len(self.stored)
        self.added: list[str] = []

    def add(self, key: str) -> None:
        self.keys.add(key)
        self.added.append(key)

    def kept_list(self) -> list[str]:
        """The newest ``cap`` keys, old and added; the evicted leave the set too."""
        room = self.cap - len(self.added)
        if room <= 0:
            out, gone = self.added[-self.cap :], [*self.stored, *self.added[: -self.cap]]
        else:
            cut = max(len(self.stored) - room, 0)
            out, gone = [*self.stored[cut:], *self.added], list(self.stored[:cut])
        if gone and self.unique:  # an evicted key is not among the kept ones
            self.keys.difference_update(gone)
        return out

    def storable_as_is(self, rest: dict[str, Any]) -> bool:
        """Whether a meta of ``rest`` and the kept list is storable, from ``rest`` and the keys
        added alone (the list kept from the state was): True only when that is known."""
        if not self.known:
            return False
        try:
            orjson.dumps(rest)
            orjson.dumps(self.added)
        except TypeError:
            return False
        return True

    def keep(self, held: Any) -> None:
        """The state now holds ``held`` as its ``seen``: the set is its keys' (``kept_list``
        made them so) when no two were alike."""
        if self.unique and isinstance(held, list) and len(held) <= self.cap:
            self.memo[MEMO] = [((), (held, self.keys))]
