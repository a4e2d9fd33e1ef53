"""Requests in flight per principal, bounded in number and in body bytes: the proxy's connection
slots (``server.max_connections``), upstream connections (``limits.upstream_max_connections``)
and memory are shared by every tenant, and a stream holds its connections and its request's
memory for as long as the model writes. Without a bound one tenant's long streams take every
upstream connection and every other tenant's request queues behind them (eight held upstream
connections made another principal's 0.4 s request take 5.8 s), and its large bodies take the
memory (six 26 MB bodies waiting on the upstream held ~600 MB of the server's; a hundred, 10 GB).
Past a bound a request is answered 429 with ``retry-after``: for the count and a declared
``content-length``, before its body is read; for a body sent without one, as soon as the bytes
read pass the bound. The agents' SDKs retry a 429. Every principal's bodies together are bounded
too (``limits.max_body_bytes_in_flight``): in passthrough a network has up to 16 lanes, and
20 made-up keys from one host held 136 bodies of 30 MiB, the server's memory 425 MB -> 4.4 GB."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from proxy.errors import TooManyInFlight
from proxy.fair_share import may_take
from proxy.settings import LimitSettings


def principal_bound(limits: LimitSettings) -> int:
    """``limits.max_in_flight_per_principal``, by default half the upstream connections: one
    tenant leaves the other half to the rest."""
    configured = limits.max_in_flight_per_principal
    return configured if configured is not None else max(1, limits.upstream_max_connections // 2)


def principal_byte_bound(limits: LimitSettings) -> int:
    """``limits.max_body_bytes_in_flight_per_principal``, by default 8 largest bodies."""
    configured = limits.max_body_bytes_in_flight_per_principal
    return configured if configured is not None else 8 * limits.max_body_bytes


def total_byte_bound(limits: LimitSettings) -> int:
    """``limits.max_body_bytes_in_flight``, by default 16 largest bodies: what every lane's
    requests carry in all (a lane's own bound times the lanes is no bound on the memory)."""
    configured = limits.max_body_bytes_in_flight
    return configured if configured is not None else 16 * limits.max_body_bytes


@dataclass
class Ticket:
    """One request's place among its principal's in flight, and the body bytes it counts."""

    principal: str
    size: int = 0


class InFlight:
    """Each principal's requests in flight and their bodies' bytes (a principal with none is not
    kept)."""

    def __init__(
        self,
        bound: int,
        byte_bound: int,
        total_bound: int | None = None,
        capacity: int | None = None,
    ) -> None:
        self.bound = bound
        self.byte_bound = byte_bound
        self.total_bound = total_bound  # every principal's together (None: none)
        self.capacity = capacity  # the upstream connections every principal shares (None: none)
        self._counts: dict[str, int] = {}
        self._bytes: dict[str, int] = {}
        self._total = 0
        self._requests = 0  # every principal's together

    def enter(self, principal: str) -> Ticket:
        """Count one more of ``principal``'s; ``TooManyInFlight`` (counting nothing) past the
        bound or its fair share of the upstream connections (``within_share``). Each ticket
        returned is given back once with ``leave``."""
        count = self._counts.get(principal, 0)
        if count >= self.bound:
            raise TooManyInFlight(
                f"This client already has {self.bound} requests in flight through the proxy "
                "(limits.max_in_flight_per_principal); retry when one has finished."
            )
        if not self.within_share(principal):
            # no count: an unverified principal's lane is its network's, whose other clients'
            # requests its count holds
            raise TooManyInFlight(
                "The proxy's upstream connections (limits.upstream_max_connections) are nearly "
                "all in use, and this client has its share of them in flight; retry when one "
                "has finished."
            )
        self._counts[principal] = count + 1
        self._requests += 1
        return Ticket(principal)

    def within_share(self, principal: str) -> bool:
        """Whether one more of ``principal``'s fits its fair share of the upstream connections
        (``proxy.fair_share``)."""
        others = len(self._counts) - (principal in self._counts)
        return may_take(self._counts.get(principal, 0), self._requests, others, self.capacity)

    def size(self, ticket: Ticket, size: int) -> None:
        """The ticket's body counts ``size`` bytes now (its declared length, then its own);
        ``TooManyInFlight`` (its count unchanged) when the principal's others and it would pass
        the byte bound. A body alone is never refused here (``limits.max_body_bytes`` is)."""
        others = self._bytes.get(ticket.principal, 0) - ticket.size
        if others and others + size > self.byte_bound:
            # the bound only: an unverified principal's lane is its network's, whose other
            # clients' bodies its count holds
            raise TooManyInFlight(
                "This client's requests in flight through the proxy carry as many bytes of "
                "bodies as limits.max_body_bytes_in_flight_per_principal allows "
                f"({self.byte_bound}); retry when one has finished."
            )
        everyone = self._total - ticket.size
        if self.total_bound is not None and everyone and everyone + size > self.total_bound:
            # the bound only: what the others carry is other tenants' (their bodies' sizes)
            raise TooManyInFlight(
                "The requests in flight through the proxy carry as many bytes of bodies as "
                f"limits.max_body_bytes_in_flight allows ({self.total_bound}); retry when one "
                "has finished."
            )
        self._set_bytes(ticket.principal, others + size)
        self._total = everyone + size
        ticket.size = size

    def grower(self, ticket: Ticket) -> Callable[[int], None]:
        """A body reader's ``charge`` (``asgi_send.read_body``): the ticket counts the bytes read
        once they pass what it counts (a body sent with no declared length, as it is read),
        ``TooManyInFlight`` past the byte bound as for ``size``. Without it such a body counted
        nothing until read whole: one tenant's hundred uploads held a hundred bodies' memory."""

        def grow(size: int) -> None:
            if size > ticket.size:
                self.size(ticket, size)

        return grow

    def leave(self, ticket: Ticket) -> None:
        principal = ticket.principal
        self._set_bytes(principal, self._bytes.get(principal, 0) - ticket.size)
        self._total -= ticket.size
        ticket.size = 0
        count = self._counts[principal] - 1
        self._requests -= 1
        if count:
            self._counts[principal] = count
        else:
            del self._counts[principal]

    def _set_bytes(self, principal: str, size: int) -> None:
        if size:
            self._bytes[principal] = size
        else:
            self._bytes.pop(principal, None)

    def of(self, principal: str) -> tuple[int, int]:
        """(requests, body bytes) ``principal`` has in flight."""
        return self._counts.get(principal, 0), self._bytes.get(principal, 0)


@contextmanager
def holding(in_flight: InFlight, lane: str) -> Iterator[None]:
    """One request of ``lane`` in flight for the block (``TooManyInFlight`` past its bound), its
    place given back however the block ends: a request with no body that still holds an upstream
    connection (a model list, which a slow upstream may keep for its whole timeout; uncounted,
    one tenant's lists took every connection and another's request queued behind them)."""
    ticket = in_flight.enter(lane)
    try:
        yield
    finally:
        in_flight.leave(ticket)


def declared_length(headers: dict[str, str], limits: LimitSettings) -> int:
    """The body's ``content-length`` (at most ``limits.max_body_bytes``: a longer one is refused
    413 anyway), 0 where none is declared."""
    declared = headers.get("content-length", "")
    if not (declared.isascii() and declared.isdigit()):  # ("²".isdigit(), and int() refuses it)
        return 0
    # a longer digit string than any limit is refused 413 anyway: not given to int()
    return (
        limits.max_body_bytes if len(declared) > 18 else min(int(declared), limits.max_body_bytes)
    )


def retry_headers(error: Exception) -> dict[str, str]:
    """The headers an error answer carries: ``retry-after`` for ``TooManyInFlight``."""
    if isinstance(error, TooManyInFlight):
        return {"retry-after": str(error.retry_after_s)}
    return {}
