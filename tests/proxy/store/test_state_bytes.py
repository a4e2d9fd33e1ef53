"""A session's state is bounded by bytes, not counts (docs/security.md, "Limits"): the rules keep
call ids and paths short (a client's call id may be megabytes: 5,000 of them made one session's
state 6.7 MiB), a state over ``limits.max_state_bytes`` is stored without its largest namespaces
(its lineage kept), and the stores' state caches are bounded by the bytes their states take."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.store.state_bytes import OBJECT_FACTOR, StateCache, stored_state
from rules.activity.storable import MAX_ID_CHARS, stored_id
from rules.base import SessionState
from rules.context import working_set
from rules.entities import track_entities
from tests.proxy.store.conftest import StoreFactory
from tests.support.factories import apply_rules, assistant, ctx, result, shell


def _long_id_session(calls: int, id_chars: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "build it"}]
    for i in range(calls):
        cid = f"call_{i}_" + "x" * id_chars
        messages += [assistant(None, shell(cid, f"touch f{i}.txt")), result(cid, "")]
    return messages


def test_long_call_ids_are_kept_short_in_the_state() -> None:
    out = apply_rules(
        ctx(_long_id_session(2_000, 2_000)),
        (track_entities, track_entities.Config()),
        (working_set, working_set.Config()),
    )
    meta = out.state.get(track_entities.META)
    assert len(meta["seen"]) == 2_000
    assert max(map(len, meta["seen"])) <= MAX_ID_CHARS + 13
    assert len(orjson.dumps(out.state.to_json())) < 300_000  # 8 MB of ids before
    # the same id always gives the same key: the next request reads nothing twice
    again = apply_rules(
        ctx(_long_id_session(2_000, 2_000), state=out.state),
        (track_entities, track_entities.Config()),
    )
    assert again.state.get(track_entities.META)["seen"] == meta["seen"]
    assert stored_id("x" * 65) != stored_id("x" * 66) and stored_id("short") == "short"


def _big_state() -> SessionState:
    return SessionState(
        {
            "big": ["b" * 1_000] * 1_000,  # ~1 MB
            "mid": ["m" * 100] * 1_000,  # ~100 KB
            "small": {"n": 1},
            "_lineage": {"head": [3, "c" * 24]},
        }
    )


def test_a_state_over_the_bound_loses_its_largest_namespaces_first() -> None:
    state = _big_state()
    same, blob = stored_state(state, 2_000_000)
    assert same is state and blob == orjson.dumps(state.to_json())
    shed, blob = stored_state(state, 600_000)
    assert set(shed.data) == {"mid", "small", "_lineage"} and len(blob) <= 600_000
    shed, _ = stored_state(state, 10)
    assert set(shed.data) == {"_lineage"}  # which conversation the rest belongs to: always kept


async def test_the_stores_keep_a_state_within_the_bound(make_store: StoreFactory) -> None:
    store: Any = make_store(max_state_bytes=600_000, batch_window_s=0.01)
    await store.open()
    try:
        async with store.session("s") as held:
            await held.save(_big_state(), None)
        await store.flush()
        cached, _ = await store.load_state("s")  # the cache holds what was stored
        assert set(cached.data) == {"mid", "small", "_lineage"}
    finally:
        await store.close()
    fresh: Any = make_store()  # another process: read from the database
    await fresh.open()
    try:
        stored, _ = await fresh.load_state("s")
        assert set(stored.data) == {"mid", "small", "_lineage"}
    finally:
        await fresh.close()


async def test_the_state_cache_is_bounded_by_bytes(make_store: StoreFactory) -> None:
    store: Any = make_store(state_cache_bytes=1_000_000, batch_window_s=0.01)
    await store.open()
    try:
        state = SessionState({"notes": ["n" * 100] * 500})  # ~51 KB of JSON, charged ~4×
        for i in range(20):
            async with store.session(f"s{i}") as held:
                await held.save(state, None)
        await store.flush()
        cache = store._states
        assert cache.held_bytes <= 1_000_000
        assert 0 < len(cache) < 20  # ~200 KB each: 4 fit (the count bound is 2,000)
        evicted = next(f"s{i}" for i in range(20) if f"s{i}" not in cache)
        again, _ = await store.load_state(evicted)  # read back from the database
        assert again.data == state.data
    finally:
        await store.close()


def test_the_cache_charges_what_the_writer_wrote() -> None:
    cache: StateCache[tuple[SessionState, str | None]] = StateCache(lambda v: v[0], 10, 100_000)
    a, b = SessionState({"a": 1}), SessionState({"b": 2})
    cache.put("s", (a, None))  # saved, not written yet: the default charge
    cache.written("s", b, None, 10)  # another state written: not this entry's
    assert cache.get("s") == (a, None)
    cache.written("s", a, (b, None), 1_000)  # written as ``b`` (shed), 1,000 bytes of JSON
    assert cache.get("s") == (b, None) and cache.held_bytes == OBJECT_FACTOR * 1_000
    for i in range(30):
        cache.put(f"t{i}", (a, None), 5_000)  # 20 KB each: 5 fit
    assert cache.held_bytes <= 100_000 and len(cache) == 5 and cache.get("t29") is not None
