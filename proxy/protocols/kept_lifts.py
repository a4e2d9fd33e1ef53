"""Liftings kept across requests (the Anthropic adapter's; a Responses patch costs less than its
key). The overlay replays the rules' edits on every request, so the same changed messages come
back each time, as new objects: the adapter looks a lifting up by the content hashes of the rules'
output messages it stands for and the bytes of the client's messages it patched (together, every
input of the lifting), and on a hit only parses what it lifted last time.

Bounded by bytes in two generations (``proxy.generations``); an entry is kept as bytes, so each
request gets new objects (the forwarded body may be changed downstream)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import orjson

from proxy.generations import Generations, compact
from rules.memo_scope import memo_scope

# What an entry holds beyond the bytes charged for it: its tuples and containers, and per lifted
# value its key's content hash and what was derived from it (the final check's facts)
ENTRY_OVERHEAD_BYTES = 512
PER_VALUE_BYTES = 384
_JSON_LEAVES = (str, int, float, bool, type(None))


def _json(value: Any) -> bool:
    """Whether ``value`` is made of JSON types only (a tuple, say, would come back a list)."""
    kind = value.__class__
    if kind is dict:
        return all(k.__class__ is str and _json(v) for k, v in value.items())
    if kind is list:
        return all(_json(v) for v in value)
    return kind in _JSON_LEAVES


def json_exact(value: Any) -> bytes | None:
    """``value``'s JSON (compact), when parsing it gives ``value`` back exactly: JSON types only
    (a tuple would come back a list) and nothing JSON has no word for (a NaN, say)."""
    try:
        data = orjson.dumps(value)
    except TypeError:
        return None
    if not _json(value) or orjson.loads(data) != value:
        return None
    return compact(data)


# What an adapter derives from each lifted value to keep with it (the final check's facts)
Derive = Callable[[Any], Any]


def _compact_key(key: Any) -> Any:
    """``key`` with each of its bytes ``compact``."""
    if key.__class__ is bytes:
        return compact(key)
    if key.__class__ is tuple:
        return tuple(_compact_key(k) for k in key)
    return key


_Entry = tuple[bytes, tuple[Any, ...] | None, int, Hashable]


class KeptLifts(Generations[_Entry]):
    """Each entry: the lifted values' JSON (a hit parses it again: new objects throughout, in
    their key order, cheaper than copying them), what was derived from each (immutable, shared),
    the bytes it is charged and the key it was kept under (compact, used again when a hit moves
    it to the newer generation)."""

    def __init__(self, max_bytes: int = 16_000_000) -> None:
        super().__init__(max_bytes)

    def get(self, key: Hashable) -> tuple[list[Any], tuple[Any, ...] | None] | None:
        """New copies of the values kept for ``key`` and what was derived from them; None when
        unknown. Within the principal's own entries (``rules.memo_scope``)."""
        key = (memo_scope(), key)
        hit = self._young.get(key)
        if hit is None:
            hit = self._old.get(key)
            if hit is None:
                return None
            self._keep(hit[3], hit, hit[2])  # used again: into the newer generation
        return orjson.loads(hit[0]), hit[1]

    def put(
        self, key: Hashable, values: list[Any], key_bytes: int, derive: Derive | None = None
    ) -> tuple[Any, ...] | None:
        """Keep ``values`` (as JSON) for ``key``, charged their size, ``key_bytes`` (the client's
        bytes the key holds) and ``ENTRY_OVERHEAD_BYTES``; only when parsing the JSON gives them
        back exactly (not a NaN, say, which JSON has no word for). Returns what ``derive`` gave
        for each value (from a copy of its own: what is kept shares nothing with the request)."""
        try:
            data = orjson.dumps(values)
        except TypeError:
            return None
        if not _json(values):
            return None
        copies = orjson.loads(data)
        if copies != values:
            return None
        derived = tuple(derive(v) for v in copies) if derive is not None else None
        cost = len(data) + key_bytes + ENTRY_OVERHEAD_BYTES + PER_VALUE_BYTES * len(values)
        kept_key = (memo_scope(), _compact_key(key))
        self._keep(kept_key, (compact(data), derived, cost, kept_key), cost)
        return derived

    def lifted(
        self,
        key: Hashable | None,
        key_bytes: int,
        lift: Callable[[], list[Any]],
        derive: Derive | None = None,
    ) -> tuple[list[Any], tuple[Any, ...] | None]:
        """What ``lift`` returns, from a kept lifting for ``key`` when there is one (``key``
        None: lifted every time), and ``derive``'s answer for each value (None: not known)."""
        if key is None:
            return lift(), None
        hit = self.get(key)
        if hit is not None:
            return hit
        values = lift()
        return values, self.put(key, values, key_bytes, derive)
