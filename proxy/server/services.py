"""What the handlers need, built once by the app's lifespan (``proxy.app``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from proxy.principals import Principals
from proxy.rewrite.engine import Engine
from proxy.server.in_flight import InFlight, principal_bound, principal_byte_bound, total_byte_bound
from proxy.settings import Settings
from proxy.store.base import Store
from proxy.telemetry.observe import Observers
from proxy.upstream.openai import UpstreamClient


@dataclass
class Services:
    """What the handler needs, built once by the app's lifespan."""

    settings: Settings
    store: Store
    engine: Engine
    upstream: UpstreamClient
    principals: Principals
    observers: Observers = field(default_factory=Observers)
    in_flight: InFlight = field(init=False)  # each principal's requests in flight, bounded

    def __post_init__(self) -> None:
        limits = self.settings.limits
        self.in_flight = InFlight(
            principal_bound(limits),
            principal_byte_bound(limits),
            total_byte_bound(limits),
            limits.upstream_max_connections,
        )
