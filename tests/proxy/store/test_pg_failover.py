"""PostgreSQL failed over to a standby at the same address (a virtual address moved, a DNS name
repointed): the pooled connections were made to the old server, and nothing told the replica so
(the old server's close never reached it). The first one used fails; the others are as dead, so
the pool drops them and the next try connects afresh: the store is back at once, instead of
finding each dead connection out on a try of its own, a growing pause apart (8 idle connections
took 8 tries and about 9 s offline, every request meanwhile served from memory, nothing saved)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
from collections.abc import AsyncIterator

import pytest

from proxy.store.postgres import PostgresStore
from rules.base import SessionState
from tests.support.postgres import PgServer

IDLE = 8  # connections pooled before the failover


class FailoverRelay:
    """A TCP relay to PostgreSQL. ``fail_over``: the connections made before it were the old
    server's; the next bytes a client sends on one are answered with a reset, as the new server
    answers a connection it never had; new connections reach the server."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.generation = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._upstreams: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def fail_over(self) -> None:
        """The old server is gone: its side of each connection ends, the client is not told."""
        self.generation += 1
        for upstream in self._upstreams:
            upstream.transport.abort()
        self._upstreams.clear()

    async def close(self) -> None:
        self.fail_over()
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        born = self.generation
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        self._upstreams.append(up_writer)

        async def to_server() -> None:
            while data := await reader.read(65536):
                if self.generation != born:  # a connection the new server never had: a reset
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                up_writer.write(data)
                await up_writer.drain()
            up_writer.close()

        async def to_client() -> None:
            while data := await up_reader.read(65536):
                writer.write(data)
                await writer.drain()
            if self.generation == born:  # the server closed it: said to the client
                writer.close()

        with contextlib.suppress(OSError):
            await asyncio.gather(to_server(), to_client())


@pytest.fixture
async def relay(pg_server: PgServer) -> AsyncIterator[FailoverRelay]:
    made = FailoverRelay(pg_server.port)
    await made.start()
    yield made
    await made.close()


async def test_after_a_failover_the_store_is_back_at_once(
    pg_server: PgServer, relay: FailoverRelay
) -> None:
    url = pg_server.database().replace(f":{pg_server.port}/", f":{relay.port}/")
    store = PostgresStore(url, pool_size=IDLE + 2, batch_window_s=0.0)
    await store.open()
    try:

        async def one(n: int, gate: asyncio.Event) -> None:
            async with store.session(f"alice/s{n}") as held:
                await gate.wait()  # all held at once: a connection each
                await held.save(SessionState({"n": n}), None)

        gate = asyncio.Event()
        tasks = [asyncio.create_task(one(n, gate)) for n in range(IDLE)]
        await asyncio.sleep(0.5)
        gate.set()
        await asyncio.gather(*tasks)
        await store.flush()
        assert len(store._pool._idle) >= IDLE
        relay.fail_over()
        started = time.monotonic()
        saved = None
        while saved is None and time.monotonic() - started < 30:
            async with store.session("alice/after") as held:
                if held.conn is not None:  # the database reached: saved there
                    saved = time.monotonic() - started
                    await held.save(SessionState({"after": True}), None)
            await asyncio.sleep(0.05)
        assert saved is not None and saved < 3.0, saved
        await store.flush()
        assert (await store.load_state("alice/after"))[0].get("after") is True
    finally:
        await store.close()
