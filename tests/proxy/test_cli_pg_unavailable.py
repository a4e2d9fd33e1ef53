"""A PostgreSQL store that cannot be opened at start-up (nothing listening, no such database, no
such role) is one line naming what failed, its password left out, and exit 2, for ``serve`` (said
before uvicorn starts: not its traceback and exit 3) and the store's other commands alike, as a
SQLite file that is no database is."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.cli import main
from proxy.store.pg_unavailable import unavailable
from tests.support.postgres import PgServer

PASSWORD = "s3cret-pw"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port() -> int:
    return closed_port()


COMMANDS = (["logs"], ["show", "last"], ["vacuum"], ["migrate"])


def said(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ctxproxy: "), err
    assert PASSWORD not in err
    return err


def test_nothing_listening_is_one_line_and_exit_2_for_each_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = closed_port()
    url = f"postgresql://bob:{PASSWORD}@127.0.0.1:{port}/ctx"
    for command in (*COMMANDS, ["serve", "--port", str(free_port())]):
        assert main([*command, "--db", url]) == 2, command
        err = said(capsys)
        assert err == (
            f"ctxproxy: the PostgreSQL store postgresql://bob:***@127.0.0.1:{port}/ctx cannot "
            "be opened: connection refused\n"
        )


def test_serve_says_it_before_uvicorn_starts(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("logging:\n  json_lines: false\n")
    url = f"postgresql://bob:{PASSWORD}@127.0.0.1:{closed_port()}/ctx"
    args = ["serve", "--config", str(config), "--port", str(free_port()), "--db", url]
    done = subprocess.run(
        [sys.executable, "-m", "proxy.cli", *args],
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"ctxproxy: the PostgreSQL store {url.replace(PASSWORD, '***')} cannot be opened: "
        "connection refused"
    ]


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("postgres@{host}/no_such_db", 'database "no_such_db" does not exist'),
        (f"nobody_here:{PASSWORD}@{{host}}/postgres", 'role "nobody_here" does not exist'),
    ],
    ids=["no-database", "no-role"],
)
def test_a_login_or_database_refused_is_one_line_naming_it(
    pg_server: PgServer, capsys: pytest.CaptureFixture[str], where: str, reason: str
) -> None:
    url = "postgresql://" + where.format(host=f"127.0.0.1:{pg_server.port}")
    for command in (["logs"], ["serve", "--port", str(free_port())]):
        assert main([*command, "--db", url]) == 2
        err = said(capsys)
        assert err.endswith(f"cannot be opened: {reason}\n"), err


def test_a_refused_password_is_said_without_it() -> None:
    import asyncpg

    url = f"postgresql://bob:{PASSWORD}@db.internal:5432/ctx"
    refused = asyncpg.exceptions.InvalidPasswordError(
        'password authentication failed for user "bob"'
    )
    quoted = ValueError(f"invalid DSN {url}")  # a driver quoting the URL it was given
    assert str(unavailable(url, refused)) == (
        "the PostgreSQL store postgresql://bob:***@db.internal:5432/ctx cannot be opened: "
        'password authentication failed for user "bob"'
    )
    assert PASSWORD not in str(unavailable(url, quoted))


def test_a_port_past_65535_and_a_common_password_are_said_plainly() -> None:
    """A port the socket layer refuses (``OverflowError``) was a traceback; a password such as
    ``postgres`` was masked wherever its letters stood ("***ql://***:***@…")."""
    import asyncio

    from proxy.store.pg_unavailable import StoreUnavailable, check_reachable

    try:
        asyncio.run(check_reachable("postgresql://u:p@127.0.0.1:99999/db"))
    except StoreUnavailable as exc:
        assert str(exc) == (
            "the PostgreSQL store postgresql://u:***@127.0.0.1:99999/db cannot be opened: "
            "connect(): port must be 0-65535."
        )
    else:
        raise AssertionError("opened")
    common = "postgresql://postgres:postgres@127.0.0.1:9/postgres"
    said = str(unavailable(common, ConnectionRefusedError(111, "Connection refused")))
    assert said.startswith("the PostgreSQL store postgresql://postgres:***@127.0.0.1:9/postgres")
