"""Connections are taken before a header is read, so one host holding them open (slowloris, idle
keep-alives) would fill ``server.max_connections`` for every tenant. Past its share
(``server.max_connections_per_address``, half by default), a host's next connection is answered
503 and closed at once; a trusted proxy's connections, which carry many clients, are not counted.
Served exactly as ``ctxproxy serve`` configures uvicorn."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from proxy.settings import settings_from_mapping
from tests.support.live import stop
from tests.support.served import serve_like_cli


@contextmanager
def served(tmp_path: Path, server: dict[str, Any]) -> Iterator[tuple[str, int]]:
    upstreams = [{"name": "u", "base_url": "http://127.0.0.1:9/v1", "match": ["*"]}]
    settings = settings_from_mapping({"upstreams": upstreams, "server": server})
    srv, base = serve_like_cli(settings, str(tmp_path / "db"))
    try:
        host, port = base.removeprefix("http://").split(":")
        yield host, int(port)
    finally:
        stop(srv)


def idle(stack: ExitStack, host: str, port: int) -> socket.socket:
    """A connection that sends nothing, as a slow-header client holds one."""
    return stack.enter_context(socket.create_connection((host, port), timeout=5))


def refused(sock: socket.socket) -> bool:
    """Whether the server answered this connection 503 before any request."""
    try:
        data = sock.recv(4096)
    except TimeoutError:
        return False
    return data.startswith(b"HTTP/1.1 503")


def test_a_host_past_its_share_is_refused_and_a_closed_connection_frees_its_place(
    tmp_path: Path,
) -> None:
    with served(tmp_path, {"max_connections": 6}) as (host, port), ExitStack() as stack:
        held = [idle(stack, host, port) for _ in range(3)]  # half of 6: its share
        for sock in held:
            sock.settimeout(0.3)
        extra = idle(stack, host, port)
        assert refused(extra)
        assert not any(refused(sock) for sock in held)  # the three are still open, unanswered
        held[0].close()
        with httpx.Client() as client:  # a fourth once one is gone
            assert client.get(f"http://{host}:{port}/healthz").status_code == 200


def test_a_refused_connection_that_sent_its_request_reads_the_answer(tmp_path: Path) -> None:
    """Not a reset: what it sent is read and dropped while the answer goes out."""
    server = {"max_connections": 50, "max_connections_per_address": 1}
    with served(tmp_path, server) as (host, port), ExitStack() as stack:
        idle(stack, host, port)
        sock = idle(stack, host, port)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: p\r\n\r\n" + b"x" * 100_000)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 503") and b"from this address" in answer


def test_the_share_is_configurable_and_a_trusted_proxy_is_not_counted(tmp_path: Path) -> None:
    with (
        served(tmp_path, {"max_connections": 50, "max_connections_per_address": 2}) as (
            host,
            port,
        ),
        ExitStack() as stack,
    ):
        held = [idle(stack, host, port) for _ in range(2)]
        assert held and refused(idle(stack, host, port))
    trusted = {"max_connections": 6, "trusted_proxies": ["127.0.0.1"]}
    with served(tmp_path, trusted) as (host, port), ExitStack() as stack:
        for _ in range(4):
            idle(stack, host, port)
        with httpx.Client() as client:
            assert client.get(f"http://{host}:{port}/healthz").status_code == 200
