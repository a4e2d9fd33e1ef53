"""The cache ledger (each session's previous request, for the cost line) evicts fairly: over its
bound the principal holding most sessions loses its least recently used. Finding that session
must not cost a walk over every other tenant's: with 10,000 sessions of other tenants held (older
than all of the flooding tenant's), each new session of the flooding tenant walked all of them on
the event loop (3-16 ms a request, every tenant's requests waiting behind it). Now it costs
O(log principals), as ``proxy.fair_lru`` does."""

from __future__ import annotations

from proxy.attribution.ledger import CacheLedger, _Session
from tests.support.cpu_clock import cpu_timer

FLOOD = 300


def test_a_flood_of_new_sessions_costs_no_walk_over_other_tenants() -> None:
    ledger = CacheLedger(max_sessions=20_000)
    for p in range(100):
        for i in range(100):
            ledger._keep(f"victim{p}/s{i}", _Session())
    for i in range(10_000):  # the bound reached: from now on each new session evicts one
        ledger._keep(f"flood/s{i}", _Session())
    with cpu_timer() as took:
        for i in range(10_000, 10_000 + FLOOD):
            ledger._keep(f"flood/s{i}", _Session())
    assert took.seconds < 0.15, f"{took.seconds / FLOOD * 1000:.2f} ms a session"
    assert all(f"victim{p}/s0" in ledger._sessions for p in range(100))
    assert f"flood/s{9_999 + FLOOD}" in ledger._sessions and "flood/s0" not in ledger._sessions
