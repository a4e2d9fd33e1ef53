"""How ``ctxproxy serve`` runs uvicorn: its config from ``server:`` settings, and an HTTP protocol
that bounds how long and how large a request's headers may be.

uvicorn's keep-alive timer starts only after a response, so a fresh connection trickling header
lines (slowloris) is never timed out, and httptools buffers headers without limit. The protocol
here (httptools', a dependency of ours: uvicorn's h11 fallback is never used) starts a timer
when the connection is made (and when a kept-alive connection's next request begins) and cancels
it once the headers are complete; when it fires, the connection is closed (with a 408 when part
of a request had arrived). Header bytes are counted as they are parsed: over
``server.max_header_bytes`` the request gets 431. A connection beyond its client network's share
(``server.max_connections_per_address``) is answered 503 and closed at once: connections are
taken before a header is read, so one host holding them open would fill ``max_connections`` for
every tenant. Each response's head goes out with its first
body bytes in one write (``head_hold``), and each request is told when its connection is lost
(``disconnect_watch.DisconnectSignal``, in the scope's extensions): the socket is read again once
a request's body is complete, however large, so that a hang-up is seen while it waits upstream."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, ClassVar

import orjson
import uvicorn

from proxy.networks import network_of, within
from proxy.protocols.errors import anthropic_error, gemini_error
from proxy.server.disconnect_watch import SIGNAL_KEY, DisconnectSignal
from proxy.server.head_hold import HeadHold
from proxy.server.interpreter_share import share_the_interpreter
from proxy.server.paced_reading import MAX_PIPELINED, PacedHttpTools
from proxy.settings import ServerSettings
from rules.redact import redacted_prefix

log = logging.getLogger("ctxproxy.server")


def _refusal(status: int, reason: str, text: str) -> bytes:
    body = text.encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


TIMED_OUT = _refusal(408, "Request Timeout", "Request headers not received in time.")
# No endpoint of the proxy is a websocket. Codex's built-in provider tries one on /v1/responses
# first: to a 426 it falls back to HTTPS at once (measured: 0.15–0.19 s, one handshake), while
# to a 403/404 it retries 7 times over ~6.5 s.
WS_TEXT = "websockets are not served here; use HTTPS (POST with SSE)"
TOO_LARGE_MESSAGE = "Request headers too large (over server.max_header_bytes)."


def error_body(path: bytes, status: int, message: str, code: str) -> bytes:
    """An error in the shape the path's clients read (their SDKs show its message): Gemini's on
    /v1beta/, Anthropic's on /v1/messages, else OpenAI's (with ``code``)."""
    if path.startswith(b"/v1beta/"):
        return gemini_error(status, message)
    if path.startswith(b"/v1/messages"):
        return anthropic_error(status, message)
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    return orjson.dumps({"error": error})


def ws_message(path: bytes) -> bytes:
    """The 426's body refusing a websocket on ``path``, in its protocol's shape."""
    return error_body(path, 426, WS_TEXT, "websocket_unsupported")


def no_websockets(path: bytes) -> bytes:
    """The whole 426 answering a websocket upgrade of ``path``."""
    return _json_answer(426, "Upgrade Required", ws_message(path))


def too_large(path: bytes) -> bytes:
    """The 431 in the shape the path's clients read; text/plain where no path was read."""
    if not path.startswith(b"/"):
        return _refusal(431, "Request Header Fields Too Large", TOO_LARGE_MESSAGE)
    body = error_body(path, 431, TOO_LARGE_MESSAGE, "headers_too_large")
    return _json_answer(431, "Request Header Fields Too Large", body)


def _json_answer(status: int, reason: str, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


BUSY_ADDRESS = _refusal(503, "Service Unavailable", "Too many connections from this address.")
_PATH_KEPT = 64  # bytes of the path kept: enough to tell the protocol
REFUSED_LINGER_S = 1.0  # a refused connection is closed this long after its answer at the latest


class _HeaderTooLarge(Exception):
    """Raised from a parser callback to stop parsing (httptools wraps it in its own error)."""


class HeaderLimitedHttpTools(PacedHttpTools):
    """httptools' protocol (uvicorn's default) with a header timeout and a header size limit."""

    header_timeout_s: float = 10.0
    max_header_bytes: int = 64 * 1024
    write_stall_s: float = 30.0  # the send buffer full this long: the client is cut off
    # connections from one network at most (None: no bound), the trusted proxies' not counted;
    # ``by_network``: each network's open connections, one dict per server (``protocol_class``)
    per_address: int | None = None
    trusted: tuple[str, ...] = ()
    by_network: ClassVar[dict[str, int]] = {}  # one of its own per server (``protocol_class``)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._network: str | None = None  # counted in ``by_network`` while open
        self._refused = False  # past its network's share: answered 503, closing
        self._header_timer: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._request_begun = False
        self._too_large = False
        self._path = bytearray()  # the request's path as read, to answer in its protocol
        # the requests of this connection not answered yet (more than one only when pipelined)
        # the requests not yet answered, in order (a pipelined one behind the one answered)
        self._signals: deque[tuple[Any, DisconnectSignal]] = deque()
        self._write_timer: asyncio.TimerHandle | None = None  # armed while writing is paused

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self._over_address_bound(transport):
            # answered, then what the client sends is read and dropped until it closes (closing
            # on unread bytes would reset the connection before the client reads the answer)
            self._refused = True
            transport.write(BUSY_ADDRESS)
            if transport.can_write_eof():
                transport.write_eof()
            self.loop.call_later(REFUSED_LINGER_S, transport.close)
            return
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)

    def _holding(self) -> None:
        self._disarm_header_timer()  # the client sent them: the wait is ours

    def _releasing(self) -> None:
        if self._request_begun and self._header_timer is None:
            self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        self._disarm_write_timer()
        if self._network is not None:
            left = self.by_network[self._network] - 1
            if left:
                self.by_network[self._network] = left
            else:
                del self.by_network[self._network]
            self._network = None
        super().connection_lost(exc)
        signals, self._signals = self._signals, deque()
        for cycle, signal in signals:
            # uvicorn marks only its newest cycle: an earlier one still answering (pipelined
            # behind it: a newer request arrived) would be sent a 500 on the closed transport
            if not cycle.response_complete:
                cycle.disconnected = True
            signal.fire()

    def _over_address_bound(self, transport: asyncio.Transport) -> bool:
        """Whether this connection is one more than its network may hold (else it is counted).
        Connections are taken before any header is read, so one host holding them open (slow
        headers, idle keep-alives) would fill ``server.max_connections`` for every tenant."""
        if self.per_address is None:
            return False
        peer = transport.get_extra_info("peername")
        host = str(peer[0]) if isinstance(peer, tuple) and peer else None
        network = network_of(host)
        if network is None or (self.trusted and within(host, self.trusted)):
            return False
        count = self.by_network.get(network, 0)
        if count >= self.per_address:
            return True
        self.by_network[network] = count + 1
        self._network = network
        return False

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.write_stall_s, self._write_stalled)

    def resume_writing(self) -> None:
        self._disarm_write_timer()
        super().resume_writing()

    def _disarm_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _write_stalled(self) -> None:
        """The client took nothing of its answer for ``write_stall_s``: the send waiting on it
        had no end, and a close would wait for the unsent bytes; abort, so the request's
        disconnect ends it (its upstream connection let go) and the socket is freed."""
        self._write_timer = None
        log.warning("a client took none of its answer for %g s: connection cut", self.write_stall_s)
        self.transport.abort()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes, self._request_begun = 0, True
        self._path.clear()
        if self._header_timer is None:  # a kept-alive connection's next request
            self._arm_header_timer()

    def on_url(self, url: bytes) -> None:
        if len(self._path) < _PATH_KEPT:
            self._path += url[: _PATH_KEPT - len(self._path)]
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._disarm_header_timer()
        self._request_begun = False
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.transport is self.transport:  # a new cycle (not an upgrade)
            cycle.transport = HeadHold(self.transport, self.loop)  # type: ignore[assignment]
            signal = DisconnectSignal()
            cycle.scope.setdefault("extensions", {})[SIGNAL_KEY] = {"signal": signal}
            signals = self._signals  # answered in order: the answered ones are at the front
            while signals and signals[0][0].response_complete:
                signals.popleft()
            signals.append((cycle, signal))

    def on_message_complete(self) -> None:
        super().on_message_complete()
        # uvicorn stops reading past 64 KiB of body held, and reads again only in ``receive``,
        # which the proxy does not call after the body: a client that hangs up while its large
        # request waits upstream would not be noticed (``connection_lost``) until the answer.
        # A pipelined request's arrival pauses reading again (uvicorn's ``on_headers_complete``);
        # past MAX_PIPELINED queued, reading waits for the answers (uvicorn resumes it with each),
        # so a client cannot queue requests without bound (99,000 held the loop for minutes).
        if len(self.pipeline) < MAX_PIPELINED:
            self.flow.resume_reading()

    def handle_websocket_upgrade(self) -> None:
        """Refuse every websocket upgrade with 426, so the client falls back to HTTP at once."""
        self._disarm_header_timer()
        self.transport.write(no_websockets(bytes(self._path)))
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        if not self._too_large:
            super().send_400_response(msg)
            return
        self._disarm_header_timer()
        path = bytes(self._path)
        # the path (a key may be one of its segments: ``http://proxy/sk-…/v1``), redacted, then
        # cut: a secret the cut split would keep its beginning
        shown = redacted_prefix(path[:4096].decode("latin-1").split("?")[0], 80)
        log.warning("431: request headers over %d bytes (%s)", self.max_header_bytes,
                    shown or "no path")  # fmt: skip
        self.transport.write(too_large(path))
        self.transport.close()

    def _count(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > self.max_header_bytes:
            self._too_large = True
            raise _HeaderTooLarge  # parsing stops; send_400_response answers 431

    def _arm_header_timer(self) -> None:
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_timed_out)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_timed_out(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined request trickles behind one being answered: end after that answer.
            self.cycle.keep_alive = False
            return
        if self._request_begun:
            self.transport.write(TIMED_OUT)
        self.transport.close()


def protocol_class(settings: ServerSettings) -> type[asyncio.Protocol]:
    """The protocol class for uvicorn's ``http=``, bound to these settings."""
    per_address = settings.max_connections_per_address
    attrs = {
        "header_timeout_s": settings.header_timeout_s,
        "max_header_bytes": settings.max_header_bytes,
        "write_stall_s": settings.write_stall_timeout_s,
        "per_address": per_address or max(1, settings.max_connections // 2),
        "trusted": tuple(settings.trusted_proxies),
        "by_network": {},
    }
    return type("HeaderLimitedHttpTools", (HeaderLimitedHttpTools,), attrs)


def server_config(
    app: Any, settings: ServerSettings, host: str, port: int, **overrides: Any
) -> uvicorn.Config:
    """uvicorn's config for ``ctxproxy serve``: bounded headers and connections, proxy headers
    believed only from ``server.trusted_proxies``; the process's threads hand the interpreter to
    the event loop within 0.5 ms (``interpreter_share``)."""
    share_the_interpreter()
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "http": protocol_class(settings),
        "timeout_keep_alive": settings.keep_alive_s,  # any number works (call_later)
        "limit_concurrency": settings.max_connections,
        # after SIGTERM: then the requests still running are cancelled, and the process exits
        "timeout_graceful_shutdown": settings.shutdown_timeout_s,
        # Without trusted proxies the client is the socket's peer and the scheme its own; with
        # them, uvicorn's ProxyHeadersMiddleware reads X-Forwarded-For/-Proto from those only
        # (never from $FORWARDED_ALLOW_IPS or its loopback default).
        "proxy_headers": bool(settings.trusted_proxies),
        "forwarded_allow_ips": list(settings.trusted_proxies),
        "log_level": "warning",
        "access_log": False,
        **overrides,
    }
    return uvicorn.Config(app, **options)
