"""A PostgreSQL that stops answering with its port open (a frozen host) is away, not busy: a
connection not made in time says so (``ConnectTimeout``), and while it is away one request at a
time tries it and the others go on without it. Before, each request waited a connection's whole
timeout, was told "held elsewhere", and the store was never taken offline."""

from __future__ import annotations

import socket
import time

import pytest

from proxy.store.pg_pool import Connections, ConnectTimeout
from proxy.store.pg_writer import Health, is_connection_error


@pytest.fixture
def silent_port() -> int:
    """A port that takes connections (the kernel's backlog) and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


async def test_a_connection_not_made_in_time_is_the_database_away(silent_port: int) -> None:
    pool = Connections(f"postgresql://u@127.0.0.1:{silent_port}/d", size=2, connect_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(ConnectTimeout) as info:
        await pool.take(5.0)
    assert time.monotonic() - started < 2.0
    assert is_connection_error(info.value) and not isinstance(info.value, TimeoutError)
    with pytest.raises(ConnectTimeout):  # its place was given back: the next one tries again
        await pool.take(5.0)


def test_while_away_one_caller_at_a_time_tries_it(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    health = Health()
    assert not health.skip() and not health.skip()  # up: everyone goes
    health.failed(OSError("frozen"))
    assert health.skip() and health.away()  # the wait after a failure
    now[0] += 5.0
    assert not health.skip()  # past it: this caller tries
    assert health.skip() and health.skip()  # the others do not, meanwhile
    health.failed(OSError("still frozen"))
    now[0] += 5.0
    assert not health.skip() and health.skip()
    health.ok()
    assert not health.skip() and not health.skip() and not health.away()
