"""The PostgreSQL store's connections: at most ``size`` asyncpg connections, opened when first
needed (none while the database is away: no reconnect loop of their own), the idle ones kept and
handed out newest first (closed instead once idle ``MAX_IDLE_S``), and requests beyond the bound
queued in order. In place of asyncpg's pool, which costs a request's hold and save a proxy
object, a timeout scope and a shielded waiter each on the way in and out (~30 µs a request),
even when a connection is idle.

What it keeps of a pool's rules, and one of its own:

- ``take`` waits at most ``timeout`` for a connection (``TimeoutError``), connecting included;
- ``give`` pools a connection only when it is open and in no transaction, else closes it;
- ``discard`` closes a connection that may still hold a session's advisory lock (the server
  drops the lock with it): such a connection is never pooled; its place goes to the next in line;
- ``drop_idle`` closes the idle ones, when the store finds the server gone (``Health.failed``);
- ``on_wait``, when set, is called as a ``take`` starts waiting: the store then starts the saves
  that wait for their request's answer (each holds a connection until it is done) and lets its
  parked sessions go (``roomy``: whether one may be parked now).

Nothing here resets a connection: the store ends every transaction and lets every lock go itself
(or discards the connection), so a returned connection costs no round trip."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg

# Settings an older server does not know (``tcp_user_timeout``: PostgreSQL 12): a connection it
# refuses for one of them is made again without it, and the others without it too.
OPTIONAL_SETTINGS = ("tcp_user_timeout",)

# An idle connection older than this is closed rather than used (asyncpg's pool did the same): a
# firewall or NAT may have dropped it silently, and the first request to find out would count
# the database as unreachable.
MAX_IDLE_S = 300.0


class ConnectTimeout(ConnectionError):
    """A new connection not made within its time: the server is away (frozen, unreachable), not
    busy. Not a ``TimeoutError``: a wait for a pooled connection or a lock is that."""


class Connections:
    def __init__(
        self,
        url: str,
        size: int,
        connect_timeout: float,
        server_settings: dict[str, str] | None = None,
        command_timeout: float | None = None,
    ) -> None:
        self.url = url
        self.size = size
        self._connect_timeout = connect_timeout
        # each statement's answer waited for at most this long (asyncpg's default for the
        # connection): a database that stops answering with its connections open (a frozen host,
        # a failover without a reset) held every request that had one, with no end
        self._command_timeout = command_timeout
        self._settings = server_settings or {}
        self._idle: list[tuple[Any, float]] = []  # (connection, when it was given back)
        self._open = 0  # connections open or being opened, idle or not: at most ``size``
        # each waits for a connection, or None: the place of one closed, to open anew
        self._waiting: deque[asyncio.Future[Any]] = deque()
        self._closed = False
        self.on_wait: Callable[[], None] | None = None

    @property
    def in_use(self) -> int:
        return self._open - len(self._idle)

    @property
    def roomy(self) -> bool:
        """No one waits and at most half the connections are in use: one may be kept a moment
        (the store's parked sessions) without making anyone wait for it."""
        return not self._waiting and self.in_use <= self.size // 2

    async def take(self, timeout: float | None = None) -> Any:
        """A connection of the pool's, or a new one while fewer than ``size`` are open; else the
        next one given back (or the place of the next one closed)."""
        if self._closed:
            raise asyncpg.InterfaceError("the store's connections are closed")
        while self._idle:
            conn, since = self._idle.pop()
            if not conn.is_closed() and time.monotonic() - since < MAX_IDLE_S:
                return conn
            with contextlib.suppress(Exception):
                conn.terminate()  # the server ended it, or it was idle too long
            self._open -= 1
        if self._open < self.size:
            self._open += 1
            return await self._connect(timeout)
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        if self.on_wait is not None:
            self.on_wait()
        try:
            async with asyncio.timeout(timeout):
                conn = await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():  # handed over as we gave up: pass it on
                self._hand_over(waiter.result())
            else:
                with contextlib.suppress(ValueError):
                    self._waiting.remove(waiter)
            raise
        if conn is None:  # a place freed by a closed connection: open one in it
            return await self._connect(timeout)
        return conn

    def give(self, conn: Any) -> None:
        """Back for the next request, when it is reusable; otherwise closed."""
        if conn.is_closed() or conn.is_in_transaction() or self._closed:
            self.discard(conn)
        else:
            self._hand_over(conn)

    async def give_unlocked(self, conn: Any, timeout: float) -> None:
        """``give``, first letting go of any session lock ``conn`` may hold (a pooled connection
        holds none); closed when that cannot be made sure of."""
        try:
            await conn.fetchval("SELECT pg_advisory_unlock_all()", timeout=timeout)
        except BaseException as exc:
            self.discard(conn)
            if not isinstance(exc, Exception):
                raise
            return
        self.give(conn)

    def drop_idle(self) -> None:
        """Close the idle connections (a statement failed as if the server were gone: they were
        made to the same server); the next ``take`` opens a new one."""
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        for conn, _ in idle:
            with contextlib.suppress(Exception):
                conn.terminate()

    def discard(self, conn: Any) -> None:
        """Closed at once, never pooled: it may hold a session's advisory lock."""
        with contextlib.suppress(Exception):
            conn.terminate()
        self._hand_over(None)

    @contextlib.asynccontextmanager
    async def acquire(self, timeout: float | None = None) -> AsyncIterator[Any]:
        """A connection for a block: given back after it, closed if the block raised (it may be
        mid-statement or mid-transaction)."""
        conn = await self.take(timeout)
        try:
            yield conn
        except BaseException:
            self.discard(conn)
            raise
        self.give(conn)

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        async with self.acquire() as conn:
            return list(await conn.fetch(sql, *args))

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        async with self.acquire() as conn:
            return await conn.fetchrow(sql, *args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        async with self.acquire() as conn:
            return await conn.fetchval(sql, *args)

    async def execute(self, sql: str, *args: Any) -> str:
        async with self.acquire() as conn:
            return str(await conn.execute(sql, *args))

    async def close(self) -> None:
        """Close the idle connections (politely); refuse new requests and wake those waiting.
        Connections still in use are closed as they come back."""
        self._closed = True
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_exception(asyncpg.InterfaceError("the store's connections are closed"))
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        await asyncio.gather(*(conn.close() for conn, _ in idle), return_exceptions=True)

    def terminate(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        for conn, _ in idle:
            conn.terminate()

    async def _connect(self, timeout: float | None) -> Any:
        """A new connection in a place already counted in ``_open`` (given up on failure)."""
        wait = self._connect_timeout if timeout is None else min(timeout, self._connect_timeout)
        try:
            try:
                return await self._connected(wait)
            except asyncpg.UndefinedObjectError as exc:
                unknown = [name for name in OPTIONAL_SETTINGS if f'"{name}"' in str(exc)]
                if not unknown or unknown[0] not in self._settings:
                    raise
                self._settings = {k: v for k, v in self._settings.items() if k not in unknown}
                return await self._connected(wait)
        except TimeoutError as exc:  # the server took no new connection in time: it is away
            self._hand_over(None)
            raise ConnectTimeout(f"no connection to PostgreSQL within {wait:g} s") from exc
        except BaseException:
            self._hand_over(None)
            raise

    async def _connected(self, wait: float) -> Any:
        return await asyncpg.connect(
            self.url,
            timeout=wait,
            server_settings=self._settings,
            command_timeout=self._command_timeout,
        )

    def _hand_over(self, conn: Any) -> None:
        """A connection (or, None, the place of one closed) to the first still waiting; else the
        connection is kept idle, the place freed."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        if conn is None:
            self._open -= 1
        else:
            self._idle.append((conn, time.monotonic()))
