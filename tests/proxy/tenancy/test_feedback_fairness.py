"""The upstream's cache report per session (``proxy.store.cache_feedback``: the cost model's
feedback for the session's next request) is kept in a map shared by every principal, and evicts
fairly: one tenant opening many sessions lets its own reports go, never another tenant's while it
holds more. Before, it was one LRU for all: the victim's report, evicted, cost its next request a
database read, and one whose write was still queued was read back older (the cost model then
chose for that request from a report the upstream had replaced)."""

from __future__ import annotations

from pathlib import Path

from proxy.store.cache_feedback import CacheFeedback, FeedbackStore
from proxy.store.sqlite import SQLiteStore

REPORT = CacheFeedback(at=100.0, prompt_tokens=3000, cached_tokens=2048, cache_write_tokens=None)


async def test_another_tenants_sessions_do_not_evict_a_victims_report(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"), batch_window_s=0.001)
    await store.open()
    try:
        store.cache_feedback = FeedbackStore(store, max_entries=4)
        store.cache_feedback.put("tenant-b/conv", REPORT)
        for i in range(50):  # tenant a's new sessions: each read (none) and kept
            await store.cache_feedback.get(f"tenant-a/s{i}")
            store.cache_feedback.put(f"tenant-a/t{i}", REPORT)
        assert store.cache_feedback.peek("tenant-b/conv") == (True, REPORT)
        assert store.cache_feedback.peek("tenant-a/t49") == (True, REPORT)
        assert store.cache_feedback.peek("tenant-a/s0") == (False, None)
    finally:
        await store.close()


async def test_a_tenants_own_sessions_evict_its_least_recently_used(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"), batch_window_s=0.001)
    await store.open()
    try:
        store.cache_feedback = FeedbackStore(store, max_entries=3)
        for name in ("a/1", "a/2", "a/3"):
            store.cache_feedback.put(name, REPORT)
        await store.cache_feedback.get("a/1")  # used again
        await store.cache_feedback.get("a/4")  # read: none, kept
        assert store.cache_feedback.peek("a/1")[0] and not store.cache_feedback.peek("a/2")[0]
    finally:
        await store.close()
