"""Requests in flight per principal, bounded: the proxy's connection slots (``server.
max_connections``) and upstream connections (``limits.upstream_max_connections``) are shared by
every tenant, and a stream holds one of each for as long as the model writes. Without a bound one
tenant's long streams take them all and every other tenant's request queues behind them (eight
held upstream connections made another principal's 0.4 s request take 5.8 s). Past the bound a
request is answered 429 with ``retry-after`` before its body is read: the agents' SDKs retry."""

from __future__ import annotations

from proxy.errors import TooManyInFlight
from proxy.settings import LimitSettings


def principal_bound(limits: LimitSettings) -> int:
    """``limits.max_in_flight_per_principal``, by default half the upstream connections: one
    tenant leaves the other half to the rest."""
    configured = limits.max_in_flight_per_principal
    return configured if configured is not None else max(1, limits.upstream_max_connections // 2)


class InFlight:
    """How many requests each principal has in flight (a principal with none is not kept)."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._counts: dict[str, int] = {}

    def enter(self, principal: str) -> None:
        """Count one more of ``principal``'s; ``TooManyInFlight`` (counting nothing) past the
        bound. Each ``enter`` that returns is matched by one ``leave``."""
        count = self._counts.get(principal, 0)
        if count >= self.bound:
            raise TooManyInFlight(self.bound)
        self._counts[principal] = count + 1

    def leave(self, principal: str) -> None:
        count = self._counts[principal] - 1
        if count:
            self._counts[principal] = count
        else:
            del self._counts[principal]

    def of(self, principal: str) -> int:
        return self._counts.get(principal, 0)
