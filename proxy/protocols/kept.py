"""Lowerings kept across requests (the Anthropic adapter's). An agent resends the same messages
with every request, each time as new objects: the adapter looks each client message up by its
serialised bytes (and its position, which its provenance tag names) and, on a hit, only copies
what it lowered last time, with its bytes for the runner's records.

Bounded by bytes in two generations (``proxy.generations``); entries are never changed
once kept (each request gets copies of their messages), so a race only lowers a message twice."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import orjson

from proxy.generations import Generations, compact

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
        key = (compact(data), position)
        self._keep(key, (entry, charged, key), charged)


_CONTAINERS = (dict, list)


def fresh(value: Any) -> Any:
    """A copy of a JSON value with new containers (strings and numbers are immutable: shared)."""
    if value.__class__ is dict:
        return {k: fresh(v) if v.__class__ in _CONTAINERS else v for k, v in value.items()}
    if value.__class__ is list:
        return [fresh(v) if v.__class__ in _CONTAINERS else v for v in value]
    return value


def _flat(value: Any) -> bool:
    return value.__class__ is dict and all(v.__class__ not in _CONTAINERS for v in value.values())


def plain_list(items: Any) -> bool:
    """Whether ``fresh_list`` copies ``items`` fully: a list of flat dicts, or of calls whose
    only nested value is a flat ``function``."""
    return (
        items.__class__ is list
        and all(
            _flat({**x, "function": None}) and _flat(x["function"]) if "function" in x else _flat(x)
            for x in items
            if x.__class__ is dict
        )
        and all(x.__class__ is dict for x in items)
    )


def fresh_list(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of a lowered message's list that ``plain_list`` accepts: its ``tool_calls`` or its
    content parts (the shapes the adapter lowers to), cheaper than ``fresh``."""
    return [{**x, "function": dict(x["function"])} if "function" in x else dict(x) for x in items]


# A lowered message as kept: the message (tag included), its bytes with sorted keys for the
# runner's records (None: not JSON), its keys whose values are lists for ``fresh_list`` (None:
# copied with ``fresh``)
KeptMessage = tuple[dict[str, Any], bytes | None, tuple[str, ...] | None]


def kept_message(message: dict[str, Any]) -> KeptMessage:
    try:
        data: bytes | None = compact(orjson.dumps(message, option=orjson.OPT_SORT_KEYS))
    except TypeError:
        data = None
    nested: tuple[str, ...] | None = tuple(
        k for k, v in message.items() if isinstance(v, (dict, list))
    )
    if nested and not all(plain_list(message[k]) for k in nested):
        nested = None
    return message, data, nested


def copied(message: dict[str, Any], nested: tuple[str, ...] | None) -> dict[str, Any]:
    """A request's own copy of a kept lowered message (strings are shared)."""
    if nested is None:  # an odd shape (a list for an id …): copied in full
        return fresh(message)  # type: ignore[no-any-return]
    out = dict(message)
    for name in nested:
        out[name] = fresh_list(message[name])
    return out
