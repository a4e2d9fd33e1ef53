"""The adapters' kept lowerings and liftings hold copies of the client's bytes, never the caller's
orjson output (whose buffer keeps its spare capacity: kilobytes for a short message), also when a
hit moves an entry to the newer generation."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.protocols.kept import KeptLowerings
from proxy.protocols.kept_lifts import KeptLifts


def _bytes_in(key: Any) -> list[bytes]:
    if isinstance(key, bytes):
        return [key]
    if isinstance(key, tuple):
        return [b for k in key for b in _bytes_in(k)]
    return []


def _age(kept: Any) -> None:
    """Everything kept so far into the older generation."""
    kept._old, kept._young, kept._young_bytes = kept._young, {}, 0


def test_kept_liftings_hold_copies_of_their_key_and_value_bytes() -> None:
    kept = KeptLifts()
    raw = orjson.dumps({"role": "user", "content": "hi"})
    key = (("hash-1",), (raw,), 0)
    kept.put(key, [{"role": "user", "content": "hi there"}], len(raw))
    for _ in range(2):  # as put, then as moved to the newer generation by a hit
        ((stored, entry),) = kept._young.items()
        # keyed within the principal's entries (outside a request: "")
        assert stored == ("", key) and all(b is not raw for b in _bytes_in(stored))
        assert entry[3] is stored  # the compact key, kept for the next move
        _age(kept)
        assert kept.get(key) == ([{"role": "user", "content": "hi there"}], None)


def test_kept_lowerings_move_under_their_own_key() -> None:
    kept = KeptLowerings()
    raw = orjson.dumps({"role": "user", "content": "hi"})
    kept.put(raw, 3, "lowering", 10)
    _age(kept)
    looked_up = orjson.dumps({"role": "user", "content": "hi"})  # the next request's bytes
    assert kept.get((looked_up, 3)) == "lowering"
    ((stored, entry),) = kept._young.items()
    assert stored[0] == ""  # the principal's entries (outside a request: "")
    assert stored[1][0] is not looked_up and stored[1][0] is not raw
    assert entry[2] is stored
