"""A real PostgreSQL server for the tests: Debian's ``postgresql`` package (``initdb`` and
``pg_ctl``) on a temp dir, run as a non-root user (``postgres`` when the package made it, else
``nobody``), on a free loopback port, with trust auth. ``bin/test`` installs the package when it
can; without it the tests that need a server skip with the reason."""

from __future__ import annotations

import contextlib
import glob
import ipaddress
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from tests.support.live import free_port


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


def unavailable() -> str | None:
    """Why no server can run here, or None."""
    for name in ("initdb", "pg_ctl", "postgres"):
        if _binary(name) is None:
            return f"PostgreSQL's {name} is not installed (apt-get install postgresql)"
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        return "asyncpg is not installed"
    return None


class PgServer:
    """One server; ``database()`` makes a fresh empty database and returns its URL. ``network``:
    an address of this host it listens on too, with its network's clients trusted
    (``10.213.7.1/30``), besides loopback."""

    def __init__(self, network: str | None = None) -> None:
        self.network = network
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="ctxproxy-pg-"))
        self.data = self.root / "data"
        self.user = self._run_as()
        self.log = self.root / "server.log"

    @staticmethod
    def _run_as() -> str | None:
        if os.geteuid() != 0:
            return None
        for name in ("postgres", "nobody"):
            with contextlib.suppress(KeyError):
                pwd.getpwnam(name)
                return name
        raise RuntimeError("no non-root user to run PostgreSQL as")

    def _cmd(self, *args: str) -> list[str]:
        if self.user is None:
            return list(args)
        return ["runuser", "-u", self.user, "--", *args]

    def init(self) -> None:
        if self.user is not None:
            os.chmod(self.root, 0o755)
            shutil.chown(self.root, self.user)
        subprocess.run(
            self._cmd(
                _binary("initdb") or "initdb", "-D", str(self.data), "-U", "postgres",
                "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync",
            ),
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        if self.network is not None:
            network = ipaddress.ip_interface(self.network).network
            with (self.data / "pg_hba.conf").open("a") as hba:
                hba.write(f"host all all {network} trust\n")

    def start(self) -> None:
        listen = "127.0.0.1"
        if self.network is not None:
            listen += f",{ipaddress.ip_interface(self.network).ip}"
        options = (
            f"-p {self.port} -c listen_addresses={listen} -c unix_socket_directories={self.root} "
            "-c fsync=off -c full_page_writes=off -c max_connections=200"
        )
        subprocess.run(
            self._cmd(
                _binary("pg_ctl") or "pg_ctl", "-D", str(self.data), "-l", str(self.log),
                "-o", options, "-w", "-t", "60", "start",
            ),
            check=True, capture_output=True, timeout=90,
        )  # fmt: skip

    def running(self) -> bool:
        status = subprocess.run(
            self._cmd(_binary("pg_ctl") or "pg_ctl", "-D", str(self.data), "status"),
            capture_output=True, timeout=30,
        )  # fmt: skip
        return status.returncode == 0

    def ensure_started(self) -> None:
        if not self.running():
            self.start()

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(
            self._cmd(
                _binary("pg_ctl") or "pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop"
            ),
            capture_output=True, timeout=60,
        )  # fmt: skip

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def database(self) -> str:
        """A new empty database's URL."""
        name = "t_" + uuid.uuid4().hex[:12]
        subprocess.run(
            [_binary("psql") or "psql", self.admin_url, "-q", "-c", f"CREATE DATABASE {name}"],
            check=True, capture_output=True, timeout=30,
        )  # fmt: skip
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def start_server(network: str | None = None) -> PgServer:
    server = PgServer(network)
    server.init()
    server.start()
    deadline = time.time() + 30
    while time.time() < deadline:
        done = subprocess.run(
            [_binary("psql") or "psql", server.admin_url, "-qAtc", "SELECT 1"],
            capture_output=True,
        )
        if done.returncode == 0:
            return server
        time.sleep(0.2)
    server.destroy()
    raise RuntimeError(f"PostgreSQL did not start: {server.log.read_text()[-2000:]}")


async def count(url: str, sql: str) -> int:
    """A ``SELECT count(*) …`` on its own connection."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval(sql))
    finally:
        await conn.close()


async def advisory_locks(url: str) -> int:
    """Advisory locks held now in ``url``'s database (by anyone): 0 once every session is let go.
    Not the whole server's: a backend of an earlier test's database, its connection closed,
    can still be exiting with its locks."""
    return await count(
        url,
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = "
        "(SELECT oid FROM pg_database WHERE datname = current_database())",
    )
