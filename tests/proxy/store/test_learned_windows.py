"""Windows learned from upstreams' overflow errors, kept in the store (both implementations):
the smaller of two learned while fresh, a stale one replaced by a newer statement, those older
than ``KEEP_DAYS`` neither loaded nor kept."""

from __future__ import annotations

from typing import Any

from proxy.store.learned_windows import KEEP_S, load, save

NOW = 1_800_000_000.0


async def test_the_smaller_window_is_kept_while_fresh(store: Any) -> None:
    save(store, "openai", "gpt-4o", 5000, NOW)
    save(store, "openai", "gpt-4o", 7000, NOW + 1)  # a later, larger statement: 5000 still holds
    save(store, "anthropic", "claude-x", 90_000, NOW + 2)
    await store.flush()
    assert sorted(await load(store, NOW + 3)) == [
        ("anthropic", "claude-x", 90_000),
        ("openai", "gpt-4o", 5000),
    ]


async def test_a_stale_window_is_replaced_and_expired_ones_are_deleted(store: Any) -> None:
    save(store, "openai", "raised", 3000, NOW)
    save(store, "openai", "forgotten", 4000, NOW)
    await store.flush()
    later = NOW + KEEP_S + 10
    save(store, "openai", "raised", 8000, later)  # the provider raised the model's window
    await store.flush()
    assert await load(store, later + 1) == [("openai", "raised", 8000)]
    await store.flush()  # the load queued the deletion of what it did not load
    rows = await store.fetchall("SELECT model FROM learned_windows", ())
    assert [r[0] for r in rows] == ["raised"]
