"""What ``ctxproxy serve`` admits (``server:`` and ``limits:`` in the config): its connections,
the time and size of a request, what one principal may hold in flight; validated at start-up like
the rest of ``proxy.settings``, which re-exports both."""

from __future__ import annotations

import ipaddress

from pydantic import Field, field_validator

from proxy.strict_model import Strict as _Strict


class ServerSettings(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    # A request's line and headers must arrive within this time, counted from the connection (or
    # from a kept-alive connection's next byte): slow-header senders cannot hold connections.
    header_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    # How long an idle kept-alive connection stays open between requests.
    keep_alive_s: float = Field(default=5.0, gt=0, le=3600)
    # Connections (or requests in progress) at most; beyond, requests are answered 503.
    max_connections: int = Field(default=1000, ge=1)
    # Connections from one client address (its IPv4 address, its IPv6 /64) at most; beyond, a
    # new one is answered 503 and closed. Unset: half of max_connections, so one host holding
    # connections open (slow headers, idle keep-alives) leaves the other half to everyone else.
    # The trusted proxies' connections are not counted (they carry many clients).
    max_connections_per_address: int | None = Field(default=None, ge=1)
    # A client that takes none of its answer for this long (the socket's send buffer full) is cut
    # off: it would hold its request, an upstream connection and its in-flight slot with no end
    # (an answer's bound, limits.stream_max_s, covers the waits for the upstream only).
    write_stall_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    # Request line plus headers at most (431 beyond); httptools itself has no limit.
    max_header_bytes: int = Field(default=64 * 1024, ge=1024, le=16 * 1024 * 1024)
    # On SIGTERM (or Ctrl-C) requests under way get this long to finish; streams still running
    # then are cut (each logged) and the process exits: a stream that never ends cannot hold it.
    shutdown_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    # Front proxies (addresses or networks) whose X-Forwarded-For / X-Forwarded-Proto are
    # believed; none by default, so the client is the socket's peer and the scheme its own.
    trusted_proxies: list[str] = Field(default_factory=list)

    @field_validator("trusted_proxies")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        out = []
        for item in value:
            try:  # normalised as uvicorn reads them ("10.0.0.1/8" would be a literal there)
                net = ipaddress.ip_network(item.strip(), strict=False)
            except ValueError:
                # "*" included: trusting everyone lets any client claim to be loopback.
                raise ValueError(f"not an IP address or network: {item!r}") from None
            out.append(str(net.network_address) if net.num_addresses == 1 else str(net))
        return out


class LimitSettings(_Strict):
    max_body_bytes: int = Field(default=32 * 1024 * 1024, ge=1)
    # A client must send its whole body within this time (408 otherwise): a slow or stalled
    # sender cannot hold a connection and its buffers forever.
    body_read_timeout_s: float = Field(default=60.0, gt=0)
    # A streamed answer may last this long at most (from its first byte on), then it is cut with
    # an error event: an upstream sending a keep-alive every few seconds forever (which no read
    # timeout catches) would hold the client, the session and an upstream connection. The wait
    # for an answer not streamed is held to it too (504). 0: no bound.
    stream_max_s: float = Field(default=3600.0, ge=0)
    # Open upstream connections at most (streams hold one each); beyond, requests queue for one.
    upstream_max_connections: int = Field(default=200, ge=1)
    # Requests one principal may have in flight at once (429 beyond, before its body is read);
    # unset: half of upstream_max_connections, so one tenant's streams never hold them all.
    max_in_flight_per_principal: int | None = Field(default=None, ge=1)
    # Body bytes one principal's requests in flight may carry in all (429 beyond; a declared
    # content-length is refused before the body is read); unset: 8 times max_body_bytes.
    max_body_bytes_in_flight_per_principal: int | None = Field(default=None, ge=1)
    # Body bytes all requests in flight may carry in all (429 beyond, as for one principal's):
    # the lanes each have their own bound, and many of them (a network's 16, every network's)
    # held 4 GB; unset: 16 times max_body_bytes.
    max_body_bytes_in_flight: int | None = Field(default=None, ge=1)
    # Messages (Chat Completions, Anthropic Messages) or input items (Responses API) in one body
    # at most (400 beyond): the rules' time and memory grow with them. Real agents' longest
    # conversations hold a few thousand.
    max_items: int = Field(default=20_000, ge=1, le=1_000_000)
    # JSON objects and arrays in one body at most (400 beyond), counted on the bytes before they
    # are parsed: parsing holds the interpreter, other requests included, until it is done.
    max_json_containers: int = Field(default=200_000, ge=1_000, le=10_000_000)
    # A session's state, serialised, at most: past it the largest namespaces are left out when it
    # is stored (the rules derive them again from the conversation the next request carries).
    # At least 512 KiB: the conversation's lineage (at most ~260 KiB) is always kept.
    max_state_bytes: int = Field(default=2 * 1024 * 1024, ge=512 * 1024)
