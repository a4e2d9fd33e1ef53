"""A client's network as the proxy's per-client bounds count it: an IPv4 address, or an IPv6
address's /64 (what one host is given; an IPv4 client on a dual-stack socket is its IPv4
address)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence


def network_of(address: str | None) -> str | None:
    """``address``'s network, or None for what is not an IP address."""
    try:
        ip = ipaddress.ip_address(address) if address else None
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped
        return str(mapped or ipaddress.ip_network((ip, 64), strict=False).network_address)
    return None if ip is None else str(ip)


def within(address: str | None, networks: Sequence[str]) -> bool:
    """Whether ``address`` is one of ``networks`` (addresses or CIDR networks, as
    ``server.trusted_proxies`` holds them)."""
    try:
        ip = ipaddress.ip_address(address) if address else None
    except ValueError:
        return False
    if ip is None:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in ipaddress.ip_network(n, strict=False) for n in networks)
