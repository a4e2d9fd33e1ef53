"""Windows learned from upstreams' overflow errors, kept in the store (both implementations) per
principal: the smaller of two learned while fresh, a stale one replaced by a newer statement,
those older than ``KEEP_DAYS`` neither loaded nor kept."""

from __future__ import annotations

from typing import Any

from proxy.store.learned_windows import KEEP_S, load, save

NOW = 1_800_000_000.0


async def test_the_smaller_window_is_kept_while_fresh(store: Any) -> None:
    save(store, "alice", "openai", "gpt-4o", 5000, NOW)
    save(store, "alice", "openai", "gpt-4o", 7000, NOW + 1)  # larger, later: 5000 still holds
    save(store, "bob", "openai", "gpt-4o", 7000, NOW + 1)  # another principal's: its own
    save(store, "alice", "anthropic", "claude-x", 90_000, NOW + 2)
    await store.flush()
    assert sorted(await load(store, NOW + 3)) == [
        ("alice", "anthropic", "claude-x", 90_000),
        ("alice", "openai", "gpt-4o", 5000),
        ("bob", "openai", "gpt-4o", 7000),
    ]


async def test_a_stale_window_is_replaced_and_expired_ones_are_deleted(store: Any) -> None:
    save(store, "alice", "openai", "raised", 3000, NOW)
    save(store, "alice", "openai", "forgotten", 4000, NOW)
    await store.flush()
    later = NOW + KEEP_S + 10
    save(store, "alice", "openai", "raised", 8000, later)  # the provider raised the window
    await store.flush()
    assert await load(store, later + 1) == [("alice", "openai", "raised", 8000)]
    await store.flush()  # the load queued the deletion of what it did not load
    rows = await store.fetchall("SELECT model FROM learned_windows", ())
    assert [r[0] for r in rows] == ["raised"]


async def test_past_the_bound_the_newest_windows_are_loaded(store: Any) -> None:
    from proxy.store.learned_windows import MAX_LOADED

    for i in range(MAX_LOADED + 5):  # learned one a second: model-0 is the oldest
        save(store, "alice", "openai", f"model-{i}", 1000 + i, NOW + i)
    await store.flush()
    loaded = await load(store, NOW + MAX_LOADED + 10)
    assert len(loaded) == MAX_LOADED
    models = [m for _, _, m, _ in loaded]
    # the newest kept, the oldest left out, and still oldest first (the engine keeps that order)
    assert models[-1] == f"model-{MAX_LOADED + 4}"
    assert "model-0" not in models and models[0] == "model-5"


async def test_past_the_bound_the_principal_holding_most_loses_its_oldest(store: Any) -> None:
    """One tenant's windows learned since another's (1,100 under made-up model names) push
    none of the other's out at a load (a restart, a replica starting), as in memory: ranked
    newest first within each principal, the newest of every principal load first."""
    from proxy.store.learned_windows import MAX_LOADED

    save(store, "bob", "openai", "gpt-4o", 5000, NOW)
    for i in range(MAX_LOADED + 5):
        save(store, "alice", "openai", f"made-up-{i}", 1000 + i, NOW + 1 + i)
    await store.flush()
    loaded = await load(store, NOW + MAX_LOADED + 10)
    assert len(loaded) == MAX_LOADED
    assert ("bob", "openai", "gpt-4o", 5000) in loaded
    models = [m for p, _, m, _ in loaded if p == "alice"]
    assert models[-1] == f"made-up-{MAX_LOADED + 4}"  # hers newest kept, oldest first still
    assert "made-up-5" not in models and models[0] == "made-up-6"
