"""The session memos (``proxy.rewrite.session_memos``) evict fairly: over their bytes the
principal charged most loses its least recently used session. Finding that session must not
cost a walk over every other tenant's: with 10,000 small sessions of other tenants held (older
than all of the flooding tenant's), each new session of the flooding tenant walked all of them,
under the lock the offload worker takes too (3 ms a request). Now it costs O(log principals)
(``proxy.fair_lru``)."""

from __future__ import annotations

from proxy.rewrite.session_memos import SessionMemos
from tests.support.cpu_clock import cpu_timer

FLOOD = 300
CHARGE = 1_000


def add(memos: SessionMemos, name: str) -> None:
    taken = memos.take(name, "o200k_base")
    taken.taken_bytes = CHARGE  # what a small request's messages are charged
    memos.settle(name, "o200k_base", taken, objects=1)


def test_a_flood_of_new_sessions_costs_no_walk_over_other_tenants() -> None:
    memos = SessionMemos(max_bytes=20_000 * CHARGE)
    for p in range(100):
        for i in range(100):
            add(memos, f"victim{p}/s{i}")
    for i in range(10_000):  # the bound reached: from now on each new session evicts one
        add(memos, f"flood/s{i}")
    with cpu_timer() as took:
        for i in range(10_000, 10_000 + FLOOD):
            add(memos, f"flood/s{i}")
    assert took.seconds < 0.15, f"{took.seconds / FLOOD * 1000:.2f} ms a session"
    assert memos.held_bytes <= 20_000 * CHARGE
    assert all(memos.peek(f"victim{p}/s0", "o200k_base") is not None for p in range(100))
    assert memos.peek("flood/s0", "o200k_base") is None
    assert memos.peek(f"flood/s{9_999 + FLOOD}", "o200k_base") is not None
