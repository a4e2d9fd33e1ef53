"""``ctxproxy serve``'s sockets and its "listening on" line. The address is bound before the app
starts (a taken port is one line and exit 2, before the store is opened or anything loaded), and
the line is said once uvicorn accepts connections on it: whoever reads "listening" can connect.
A request cut by the shutdown's bound is not told as a traceback (uvicorn has said it cut them,
and each request's log line says how it ended)."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable

import uvicorn


class BindError(Exception):
    """The address cannot be bound (taken, not this host's, not permitted)."""


def bind(host: str, port: int) -> list[socket.socket]:
    """Sockets bound (not listening yet: a connection is refused, not left waiting, until the
    server starts) on every address ``host`` names, as asyncio's ``create_server`` binds them."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise BindError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sockets: list[socket.socket] = []
    seen: set[tuple[object, ...]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, *address[:2]) in seen:
                continue
            seen.add((family, *address[:2]))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # "::" and "0.0.0.0" are two sockets, as asyncio's
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        where = f"[{host}]" if ":" in host else host
        why = exc.strerror or str(exc)
        raise BindError(f"cannot listen on {where}:{port}: {why.lower()}") from None
    return sockets


def bound_port(sockets: list[socket.socket], port: int) -> int:
    """The port the sockets have (the one the system chose for port 0)."""
    return int(sockets[0].getsockname()[1]) if sockets else port


class AnnouncingServer(uvicorn.Server):
    """uvicorn's server, calling ``on_started`` once it accepts connections: after the app's
    lifespan has started (the store open, the rules loaded) and the sockets listen."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_started = on_started
        logging.getLogger("uvicorn.error").addFilter(_not_a_cancel)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)  # exits the process if the lifespan fails
        if self.started:
            self._on_started()


def _not_a_cancel(record: logging.LogRecord) -> bool:
    """Keep a record unless it is a request's cancellation (``timeout_graceful_shutdown``)."""
    return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))
