"""Whom the shared in-memory maps (``proxy.fair_lru.FairLRU``) charge a principal's entries to:
the principal itself, except a passthrough principal no upstream has accepted a request of yet,
whose entries are charged to its lane (``Principals.lane``: every such principal of its client's
network shares one). A made-up key is a new principal for free, and the rules run (its session's
state cached, its request remembered) before the upstream refuses it: charged each to itself,
10,000 made-up keys holding one entry each made every real tenant holding two "the heaviest",
and its entries were evicted first. Charged to their lane, they hold most together and lose
their own.

Process-wide, as the maps are: ``Principals.lane`` tells it of each unverified principal as its
request comes in (before the rules put anything), ``Principals.accepted`` of each accepted one.
Bounded: past ``KEPT`` the oldest told of is forgotten (charged to itself again), but what it
put meanwhile stays charged to its lane; only a request still running after ``KEPT`` newer
unverified ones came in would put entries charged to itself. Written on the event loop, read
by the maps on any thread (one dict lookup: ~40 ns a put)."""

from __future__ import annotations

KEPT = 8_192
_LANES: dict[str, str] = {}  # unverified principal -> its lane (oldest told of first)


def charged_to(principal: str) -> str:
    """Whom ``principal``'s entries are charged to (itself, or its lane while unverified)."""
    return _LANES.get(principal, principal)


def unverified(principal: str, lane: str) -> None:
    """``principal`` has no upstream's acceptance yet: its entries are charged to ``lane``."""
    _LANES.pop(principal, None)
    _LANES[principal] = lane
    if len(_LANES) > KEPT:
        del _LANES[next(iter(_LANES))]


def verified(principal: str) -> None:
    """``principal`` has a lane of its own: its entries are charged to itself."""
    _LANES.pop(principal, None)
