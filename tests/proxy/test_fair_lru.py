"""``FairLRU``: over a bound, the principal holding most (entries, or bytes) loses its least
recently used entry; its bookkeeping stays exact through replacements, pops and evictions, and
its heaps stay bounded by the principals it holds, not by the puts it saw."""

from __future__ import annotations

import random

from proxy import charge_groups
from proxy.fair_lru import FairLRU


def test_the_principal_holding_most_entries_loses_its_least_recently_used() -> None:
    lru: FairLRU[str, int] = FairLRU(max_entries=4)
    lru.put("b1", 1, "b")
    for i in range(10):
        lru.put(f"a{i}", i, "a")
    assert lru.get("b1") == 1 and len(lru) == 4
    assert [k for k in lru._entries if k[0] == "a"] == ["a7", "a8", "a9"]  # a's newest
    lru.get("a7")  # a hit makes it a's most recently used: a8 goes next
    lru.put("a10", 10, "a")
    assert "a7" in lru and "a8" not in lru and lru.held_by("a") == (3, 0)


def test_the_principal_holding_most_bytes_loses_first() -> None:
    lru: FairLRU[str, str] = FairLRU(max_entries=100, max_bytes=1_000)
    lru.put("b", "small", "b", 300)
    for i in range(20):
        lru.put(f"a{i}", "large", "a", 400)
    assert "b" in lru and lru.held_bytes <= 1_000 and lru.held_by("a") == (1, 400)
    lru.put("b", "larger", "b", 600)  # replaced: charged anew, and now b holds most
    assert lru.held_by("b") == (1, 600) and lru.held_bytes == 1_000
    lru.put("a", "more", "a", 100)  # 1,100: b, holding most, loses
    assert "b" not in lru and lru.held_by("a") == (2, 500)


def test_the_bookkeeping_holds_under_any_sequence() -> None:
    rng = random.Random(7)
    lru: FairLRU[int, int] = FairLRU(max_entries=50, max_bytes=5_000)
    for step in range(20_000):
        key, principal = rng.randrange(300), f"p{rng.randrange(30)}"
        if rng.random() < 0.1:
            lru.pop(key)
        elif rng.random() < 0.3:
            lru.get(key)
        else:
            lru.put(key, step, principal, rng.randrange(400))
        assert len(lru) <= 50 and lru.held_bytes <= 5_000
    entries = lru._entries
    assert sum(lru.held_by(p)[0] for p in lru._held) == len(entries)
    assert sum(lru.held_by(p)[1] for p in lru._held) == lru.held_bytes
    assert sum(cost for _, cost, _ in entries.values()) == lru.held_bytes
    assert len(lru._by_entries) <= 2 * len(lru._held) + 66


def test_an_over_bound_put_is_weighed_against_the_others() -> None:
    """The entry just put is its principal's like any other: a principal holding most loses even
    what it just put once it has nothing older."""
    lru: FairLRU[str, str] = FairLRU(max_entries=10, max_bytes=1_000)
    lru.put("b1", "x", "b", 300)
    lru.put("b2", "x", "b", 300)
    lru.put("a", "x", "a", 900)
    assert "a" not in lru and lru.held_by("b") == (2, 600)


def test_keep_holds_entries_however_large_and_charge_reads_a_cost() -> None:
    lru: FairLRU[str, str] = FairLRU(max_entries=10, max_bytes=100, keep=1)
    lru.put("a", "huge", "p", 500)  # over the bytes alone: kept, the one entry
    assert "a" in lru and lru.charge("a") == 500 and lru.charge("b") is None
    lru.put("b", "small", "q", 10)  # b then a is evicted down to the floor
    assert list(lru) == ["b"] and lru.held_bytes == 10


def test_on_evict_is_told_of_evictions_and_first_is_the_oldest_put() -> None:
    evicted: list[tuple[str, int]] = []
    lru: FairLRU[str, int] = FairLRU(max_entries=3, on_evict=lambda k, v: evicted.append((k, v)))
    lru.put("b", 0, "q")
    for i in range(4):
        lru.put(f"a{i}", i, "p")
    assert evicted == [("a0", 0), ("a1", 1)] and lru.first() == "b"
    lru.pop("b")  # popped: not an eviction
    assert evicted == [("a0", 0), ("a1", 1)] and lru.first() == "a2"
    lru.put("a2", 22, "p")  # replaced: keeps its place
    assert lru.first() == "a2" and FairLRU[str, int](1).first() is None


def test_unverified_principals_are_charged_to_their_lane_until_verified() -> None:
    """Each made-up key holds one entry, the verified tenant two: charged each to itself, the
    tenant would hold most and lose first; charged to their lane, the made-up keys do."""
    made_up = [f"pt-made-up-{i}" for i in range(6)]
    for principal in made_up:
        charge_groups.unverified(principal, "unverified@10.9.9.9")
    try:
        lru: FairLRU[str, int] = FairLRU(max_entries=4)
        lru.put("t/1", 1, "pt-tenant")
        lru.put("t/2", 2, "pt-tenant")
        for i, principal in enumerate(made_up):
            lru.put(f"{principal}/s", i, principal)
        assert "t/1" in lru and "t/2" in lru and lru.held_by("unverified@10.9.9.9") == (2, 0)
        charge_groups.verified(made_up[-1])  # accepted since: its next put is its own
        lru.put(f"{made_up[-1]}/s", 9, made_up[-1])
        assert lru.held_by(made_up[-1]) == (1, 0)
    finally:
        for principal in made_up:
            charge_groups.verified(principal)
    assert charge_groups.charged_to(made_up[0]) == made_up[0]


def test_the_unverified_told_of_are_bounded() -> None:
    names = [f"pt-flood-{i}" for i in range(charge_groups.KEPT + 10)]
    for name in names:
        charge_groups.unverified(name, "unverified")
    try:
        assert charge_groups.charged_to(names[0]) == names[0]  # the oldest: forgotten
        assert charge_groups.charged_to(names[-1]) == "unverified"
    finally:
        for name in names:
            charge_groups.verified(name)


def test_the_entry_just_put_stays_however_large() -> None:
    """With a floor (``keep``), the entry just put stays: a state larger than the cache's bytes
    was the heaviest principal's oldest and went at once (its session read the store on each
    request), while another principal's small one stayed."""
    lru: FairLRU[str, str] = FairLRU(max_entries=100, max_bytes=1000, keep=1)
    lru.put("tenant-x/a", "small", "tenant-x", 10)
    lru.put("tenant-y/b", "large", "tenant-y", 5000)
    assert (lru.peek("tenant-y/b"), lru.peek("tenant-x/a")) == ("large", None)
