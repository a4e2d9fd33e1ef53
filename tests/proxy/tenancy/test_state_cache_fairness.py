"""The stores' cache of session states is shared by every principal, and evicts fairly: one tenant
opening many sessions (new conversation hashes, made-up session names: free to make) pushes out
its own cached states, never another tenant's while it holds more than that one. Before, it was
one LRU for all: a victim's session, evicted, paid a store read on its next request (PostgreSQL:
a round trip under its session lock), and its state could be read older than it was."""

from __future__ import annotations

from pathlib import Path

from proxy.store.sqlite import SQLiteStore
from proxy.store.state_bytes import OBJECT_FACTOR, StateCache
from rules.base import SessionState

Known = tuple[SessionState, str | None]


def test_a_flood_of_sessions_evicts_its_own_not_another_tenants() -> None:
    cache: StateCache[Known] = StateCache(lambda v: v[0], 4, 10**9)
    cache.put("tenant-b/conv", (SessionState({"turn": 1}), None), 100)
    for i in range(50):
        cache.put(f"tenant-a/s{i}", (SessionState({"n": i}), None), 100)
    assert cache.get("tenant-b/conv") is not None
    assert len(cache) == 4 and "tenant-a/s49" in cache


def test_large_states_evict_their_own_tenants_first() -> None:
    cache: StateCache[Known] = StateCache(lambda v: v[0], 100, OBJECT_FACTOR * 10_000)
    cache.put("tenant-b/conv", (SessionState({"turn": 1}), None), 1_000)
    for i in range(20):
        cache.put(f"tenant-a/big{i}", (SessionState({"n": i}), None), 4_000)
    assert cache.get("tenant-b/conv") is not None
    assert cache.held_bytes <= OBJECT_FACTOR * 10_000


def test_the_cache_keeps_recency_within_a_tenant() -> None:
    cache: StateCache[Known] = StateCache(lambda v: v[0], 3, 10**9)
    for name in ("a/1", "a/2", "a/3"):
        cache.put(name, (SessionState(), None), 10)
    cache.touch("a/1")  # used again: a/2 is now the least recently used
    cache.put("a/4", (SessionState(), None), 10)
    assert "a/1" in cache and "a/2" not in cache


async def test_another_tenants_sessions_do_not_cost_a_victim_its_cached_state(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"), state_cache_size=8, batch_window_s=0.001)
    await store.open()
    try:
        async with store.session("tenant-b/conv") as held:
            await held.save(SessionState({"turn": 1}), None)
        await store.flush()
        for i in range(100):  # tenant a opens session after session
            async with store.session(f"tenant-a/s{i}") as held:
                await held.save(SessionState({"n": i}), None)
        await store.flush()
        assert "tenant-b/conv" in store._states
    finally:
        await store.close()
