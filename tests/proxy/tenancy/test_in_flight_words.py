"""A 429 for the bytes every lane's bodies carry together (``limits.max_body_bytes_in_flight``)
said how many bytes the requests in flight already carried: the sum of other tenants' bodies,
told to whoever came next (sent a body just past the bound, a tenant read how large another's
conversations were as they went). It names the bound, never what others carry."""

from __future__ import annotations

from typing import Any

import httpx

from tests.proxy.tenancy.test_in_flight import BODY_LIMIT, big, proxy  # noqa: F401
from tests.support.edge_upstream import EdgeUpstream


def test_the_total_bounds_refusal_tells_nothing_of_other_tenants_bodies(
    proxy: tuple[str, EdgeUpstream, Any],  # noqa: F811
) -> None:
    base, _, app = proxy
    others = [BODY_LIMIT - 1000 - i * 7 for i in range(16)]  # other tenants' bodies, in flight
    held = [(f"tenant-{i}", size) for i, size in enumerate(others)]
    message = refused_beside(app, base, held, "sk-bob")
    assert "limits.max_body_bytes_in_flight" in message
    assert str(sum(others)) not in message, message

def test_a_lanes_refusal_tells_nothing_of_what_its_other_clients_carry(
    proxy: tuple[str, EdgeUpstream, Any],  # noqa: F811
) -> None:
    """Keys no upstream has answered yet share their network's lane: the lane's 429 told one
    client the bytes its neighbours' bodies carried."""
    base, _, app = proxy
    neighbours = [8 * BODY_LIMIT - 50_007]  # one neighbour's body, near the lane's byte bound
    held = [(in_flight_lane(), size) for size in neighbours]
    message = refused_beside(app, base, held, "sk-made-up")
    assert "limits.max_body_bytes_in_flight_per_principal" in message
    assert str(sum(neighbours)) not in message, message


def refused_beside(app: Any, base: str, held: list[tuple[str, int]], key: str) -> str:
    """The message of the 429 a 100 KiB body under ``key`` gets while ``held``'s (lane, body
    bytes) are in flight."""
    in_flight = app.state.services.in_flight
    tickets = []
    for lane, size in held:
        tickets.append(ticket := in_flight.enter(lane))
        in_flight.size(ticket, size)
    try:
        headers = {"content-type": "application/json", "authorization": f"Bearer {key}"}
        body = big("one more", 100 * 1024)
        refused = httpx.post(base + "/v1/chat/completions", content=body, headers=headers)
        assert refused.status_code == 429
        return str(refused.json()["error"]["message"])
    finally:
        for ticket in tickets:
            in_flight.leave(ticket)

def in_flight_lane() -> str:
    """The lane of unverified principals from loopback, as the app names it."""
    from proxy.principals import unverified_lane

    return unverified_lane(("127.0.0.1", 0))


def test_a_lanes_share_refusal_tells_nothing_of_how_many_its_other_clients_have() -> None:
    """Past its share of the upstream connections, a lane's 429 said how many requests it had
    in flight: for keys no upstream has answered yet, their network's lane, whose count is the
    neighbours' requests. It names the setting, never the count."""
    from proxy.errors import TooManyInFlight
    from proxy.server.in_flight import InFlight

    flights = InFlight(16, 1 << 30, capacity=16)
    lane = in_flight_lane()
    others = [flights.enter("tenant-a") for _ in range(8)]
    neighbours = [flights.enter(lane) for _ in range(6)]  # the lane's other clients' requests
    try:
        try:
            flights.enter(lane)
        except TooManyInFlight as refused:
            message = str(refused)
        else:
            raise AssertionError("the lane's share was not applied")
        assert "limits.upstream_max_connections" in message
        assert str(len(neighbours)) not in message, message
    finally:
        for ticket in [*others, *neighbours]:
            flights.leave(ticket)
