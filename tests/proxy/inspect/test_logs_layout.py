"""``ctxproxy logs`` reads well on a 100-column terminal and in a pipe: one line per request
(time, request id, principal, status, model, billed input sent → forwarded, the proxy's time),
no value split across lines, ``--wide`` adding the whole session id on a line of its own;
piped, plain text; ``--json`` is JSON Lines and a reader that stops early (``| head -1``) ends
it quietly. ``ctxproxy --help`` describes the commands, not the code."""

from __future__ import annotations

import asyncio
import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.cells import cell_len
from rich.console import Console

from proxy.inspect.logs_view import print_rows
from tests.proxy.inspect.test_show import FINISHED, realistic_row, write_rows

PRINCIPAL = "pt-4f3a9c1d2e7b6a50"
SESSION = f"{PRINCIPAL}/conv:0123456789abcdef0123456789abcdef"


def rows(n: int = 3, capture: bool = False) -> list[dict[str, Any]]:
    out = []
    now = time.time()
    for i in range(n):
        r = realistic_row(f"req_{i:024x}", session=SESSION, created_at=now - i)
        r.update(FINISHED)  # (write_rows finishes the stored ones the same way)
        r.update(principal=PRINCIPAL, model="claude-sonnet-4-5-20250929" if i % 2 else "gpt-5")
        r["sections"] = {**r["sections"], "tools": {"before": 7030, "after": 7030}}
        if not capture:
            r.pop("request_body"), r.pop("forwarded_body")
        out.append(r)
    return out


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return {**base, **extra}


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "log.db")
    asyncio.run(write_rows(path, *rows()))
    return path


def test_a_100_column_terminal_has_one_line_per_request() -> None:
    out = io.StringIO()
    listed = rows()
    print_rows(listed, Console(file=out, width=100, force_terminal=True, color_system=None))
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 + len(listed)  # the header, then one line each
    assert all(cell_len(line) <= 100 for line in lines), [cell_len(x) for x in lines]
    for r, line in zip(listed, lines[1:], strict=True):
        fields = line.split()
        assert fields[0] == time.strftime("%H:%M:%S", time.localtime(r["created_at"]))
        assert fields[1] == r["id"]  # whole: ``show`` takes it
        assert fields[2] == PRINCIPAL[:11] + "…" and fields[3] == "200"
        assert fields[-2] == "7942→7577"  # billed input: messages 912 → 547 plus 7030 of tools
        assert fields[-1] == "1.7ms"
    assert "billed sent→fwd" in lines[0]


def test_the_command_at_100_columns_on_a_terminal(db: str) -> None:
    """Through a pseudo-terminal, as a person runs it in a 100-column window."""
    pty = pytest.importorskip("pty")
    read, write = pty.openpty()
    run = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "logs", "--db", db],
        stdout=write,
        stderr=subprocess.PIPE,
        env=env(COLUMNS="100", TERM="xterm"),
        timeout=60,
    )
    os.close(write)
    chunks = []
    while True:
        try:
            chunk = os.read(read, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read)
    assert run.returncode == 0, run.stderr
    text = re.sub(r"\x1b\[[0-9;]*m", "", b"".join(chunks).decode()).replace("\r", "")
    lines = [x for x in text.splitlines() if x]
    assert len(lines) == 4 and all(cell_len(x) <= 100 for x in lines)


def test_piped_lines_are_plain_and_whole(db: str) -> None:
    for extra in ({}, {"COLUMNS": "60"}):  # a pipe has no width, whatever COLUMNS says
        run = subprocess.run(
            [sys.executable, "-m", "proxy.cli", "logs", "--db", db],
            capture_output=True,
            env=env(**extra),
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        text = run.stdout.decode()
        assert "\x1b" not in text and "│" not in text  # plain text, no table
        lines = text.splitlines()
        assert lines[0].split()[:3] == ["time", "request", "principal"]
        assert len(lines) == 4
        for r, line in zip(rows(), lines[1:], strict=True):
            assert r["id"] in line and f" {r['model']} " in line  # the model whole
            assert " 7942→7577 " in line


def test_wide_puts_the_session_id_on_a_line_of_its_own(db: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "logs", "--wide", "--db", db],
        stdout=subprocess.PIPE,
        env=env(),
        timeout=60,
        check=True,
    )
    lines = run.stdout.decode().splitlines()
    sessions = [x.split()[1] for x in lines if x.startswith(" " * 9 + "session ")]
    assert sessions == [SESSION] * 3  # whole, as ``logs --session`` takes it
    assert any("tools 7030" in x and "tool_results 820→14" in x for x in lines)


def test_json_is_json_lines_and_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    path = str(tmp_path / "big.db")
    asyncio.run(write_rows(path, *rows(200, capture=True)))  # more than a pipe's buffer
    argv = [sys.executable, "-m", "proxy.cli", "logs", "--json", "--limit", "200", "--db", path]
    full = subprocess.run(argv, stdout=subprocess.PIPE, env=env(), timeout=60, check=True)
    assert len(full.stdout) > 256 * 1024
    lines = full.stdout.decode().splitlines()
    assert len(lines) == 200 and all(orjson.loads(x)["id"] for x in lines)
    # ``ctxproxy logs --json | head -1``
    logs = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    assert logs.stdout is not None and logs.stderr is not None
    head = subprocess.run(["head", "-1"], stdin=logs.stdout, stdout=subprocess.PIPE, timeout=60)
    logs.stdout.close()
    err = logs.stderr.read().decode()
    assert logs.wait(60) in (0, 141)
    assert err == "", err  # no BrokenPipeError traceback, no "Exception ignored"
    assert orjson.loads(head.stdout)["id"] == "req_" + "0" * 24


@pytest.mark.parametrize("args", [["logs"], ["logs", "--wide"], ["show", "last"]])
def test_text_commands_end_quietly_on_a_closed_pipe(tmp_path: Path, args: list[str]) -> None:
    path = str(tmp_path / "many.db")
    asyncio.run(write_rows(path, *rows(400, capture=True)))
    argv = [sys.executable, "-m", "proxy.cli", *args, "--db", path]
    if args[0] == "logs":
        argv += ["--limit", "400"]
    cmd = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    assert cmd.stdout is not None and cmd.stderr is not None
    subprocess.run(["head", "-c", "10"], stdin=cmd.stdout, stdout=subprocess.PIPE, timeout=60)
    cmd.stdout.close()
    err = cmd.stderr.read().decode()
    assert cmd.wait(60) in (0, 141) and err == "", err


def test_help_describes_the_commands() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "--help"], stdout=subprocess.PIPE, check=True
    )
    text = run.stdout.decode()
    assert "reverse proxy" in text and "ctxproxy logs" in text
    assert "cmd_" not in text and "``" not in text and "build_parser" not in text
    logs = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "logs", "--help"], stdout=subprocess.PIPE, check=True
    ).stdout.decode()
    assert "JSON Lines" in " ".join(logs.split())
