"""A replica whose host vanishes (powered off, cut from the network) while one of its connections
holds a session's lock: no FIN or RST ever reaches PostgreSQL, so only the server's own probes
can tell it the connection is dead. It ends the connection within seconds and the lock goes with
it: the other replicas hold the session again and save it. With the kernel's defaults the server
waited over two hours, and each request of that session on another replica waited the lock
timeout and saved nothing.

The replica runs in a network namespace of its own, joined to this one by a veth pair; its host
vanishes when each end's neighbour entry names a hardware address no one has: frames still go
out, and are lost on the way, as on a cut network. Needs root and ``ip`` with network namespaces
(skipped with the reason otherwise)."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from proxy.store.postgres import PostgresStore
from rules.base import SessionState
from tests.support.postgres import PgServer, start_server, unavailable

ROOT = Path(__file__).resolve().parents[3]
SESSION = "alice/s"

# The replica: holds the session, says so, and keeps it. The server's probes of its connections
# are made sooner than a gateway's (seconds, not tens of them), for the test's sake.
REPLICA = """
import asyncio, sys
from proxy.store import postgres

postgres.PEER_SETTINGS = {
    "tcp_keepalives_idle": "1", "tcp_keepalives_interval": "1", "tcp_keepalives_count": "2",
    "tcp_user_timeout": "3000",
}

async def main():
    store = postgres.PostgresStore(sys.argv[1], heartbeat_s=3600.0)
    await store.open()
    async with store.session(sys.argv[2]):
        print("held", flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@dataclass(frozen=True)
class Link:
    """A veth pair: ``here`` (address ``host``) in this namespace, ``there`` (``peer``) in
    ``ns``."""

    ns: str
    here: str
    there: str
    host: str
    peer: str

    def cut(self) -> None:
        """Each end's frames sent to a hardware address no one has: lost on the way."""
        ip("neigh", "replace", self.peer, "lladdr", "02:00:00:00:00:01", "dev", self.here,
           "nud", "permanent")  # fmt: skip
        ip("netns", "exec", self.ns, "ip", "neigh", "replace", self.host, "lladdr",
           "02:00:00:00:00:02", "dev", self.there, "nud", "permanent")  # fmt: skip


@pytest.fixture
def link() -> Iterator[Link]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and the ip command (a network namespace for the replica)")
    tag = uuid.uuid4().hex[:6]
    net = f"10.213.{random.randrange(256)}"
    made = Link(f"ctxp-{tag}", f"cxa{tag}", f"cxb{tag}", f"{net}.1", f"{net}.2")
    try:
        ip("netns", "add", made.ns)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"no network namespace can be made here: {exc.stderr.decode().strip()}")
    try:
        ip("link", "add", made.here, "type", "veth", "peer", "name", made.there)
        ip("link", "set", made.there, "netns", made.ns)
        ip("addr", "add", f"{made.host}/30", "dev", made.here)
        ip("link", "set", made.here, "up")
        inside = ("netns", "exec", made.ns, "ip")
        ip(*inside, "addr", "add", f"{made.peer}/30", "dev", made.there)
        ip(*inside, "link", "set", made.there, "up")
        yield made
    finally:
        subprocess.run(["ip", "netns", "del", made.ns], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", made.here], capture_output=True, timeout=30)


@pytest.fixture
def server(link: Link) -> Iterator[PgServer]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    started = start_server(network=f"{link.host}/30")
    yield started
    started.destroy()


async def test_a_vanished_replicas_session_lock_is_dropped(link: Link, server: PgServer) -> None:
    url = server.database()
    there = url.replace("127.0.0.1", link.host)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    replica = subprocess.Popen(
        ["ip", "netns", "exec", link.ns, sys.executable, "-c", REPLICA, there, SESSION],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    other = PostgresStore(url, lock_timeout_s=1.0, heartbeat_s=3600.0)
    try:
        assert replica.stdout is not None
        said = await asyncio.wait_for(asyncio.to_thread(replica.stdout.readline), 60)
        assert said == "held\n", replica.stderr.read() if replica.stderr else said
        await asyncio.sleep(1.0)  # its last acknowledgements sent: its connection is idle
        link.cut()
        await other.open()
        deadline = time.monotonic() + 30
        while True:  # each try waits the lock timeout at most
            async with other.session(SESSION) as held:
                if not held.read_only:
                    await held.save(SessionState({"saved": True}), None)
                    break
            assert time.monotonic() < deadline, "the vanished replica still holds the session"
        await other.flush()
        assert (await other.load_state(SESSION))[0].get("saved") is True
    finally:
        replica.kill()
        replica.wait(timeout=10)
        await other.close()
