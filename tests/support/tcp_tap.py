"""A TCP relay on 127.0.0.1 that timestamps the HTTP request lines passing through it, in a
thread of its own. Put it in front of a server to learn when a client sent what, whatever the
server answers: e.g. how long Codex takes from its websocket attempt (``GET /v1/responses``
with ``upgrade: websocket``) to its first ``POST /v1/responses``."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from dataclasses import dataclass

_REQUEST_LINE = re.compile(rb"(?:^|\r\n)([A-Z]{3,7}) (\S+) HTTP/1\.[01]\r\n")


@dataclass
class Line:
    at: float  # time.monotonic() when the bytes carrying it arrived
    connection: int
    method: str
    target: str


class TcpTap:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.lines: list[Line] = []
        self.connections = 0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def first(self, method: str, target_prefix: str) -> Line | None:
        return next(
            (x for x in self.lines if x.method == method and x.target.startswith(target_prefix)),
            None,
        )

    def start(self) -> TcpTap:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("tap did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self._server = loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            loop.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return

        async def upward() -> None:
            try:
                while data := await reader.read(65536):
                    now = time.monotonic()
                    # A request's head starts a write of its own (or follows a CRLF).
                    for m in _REQUEST_LINE.finditer(data):
                        method, target = m.group(1).decode(), m.group(2).decode()
                        self.lines.append(Line(now, number, method, target))
                    up_writer.write(data)
                    await up_writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                up_writer.close()

        async def downward() -> None:
            try:
                while data := await up_reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        await asyncio.gather(upward(), downward())
