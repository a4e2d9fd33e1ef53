"""``ctxproxy serve`` says "listening on" only once it is: the store open, the rules loaded and the
port accepting connections. A port already taken is one line and exit 2, before the store is
opened or anything else started."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from tests.support.live import free_port
from tests.support.serve_cli import serve, wait_listening


def test_listening_is_said_once_the_port_accepts(tmp_path: Path) -> None:
    port = free_port()
    proc, lines = serve(tmp_path, port, tmp_path / "log.db")
    try:
        wait_listening(proc, lines)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # refused, had the line come before the server listened
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_taken_port_is_one_line_and_exit_2_before_the_store_opens(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc, lines = serve(tmp_path, port, db)
        assert proc.wait(timeout=60) == 2
    time.sleep(0.1)  # the reader thread has the last lines
    assert lines == [f"ctxproxy: cannot listen on 127.0.0.1:{port}: address already in use\n"]
    assert not db.exists()  # the store was never opened


def test_ctrl_c_stops_it_without_a_traceback(tmp_path: Path) -> None:
    """Ctrl-C: shut down as for SIGTERM, exit 130, and no ``KeyboardInterrupt`` traceback (uvicorn
    raises the signal again once it has stopped)."""
    import signal

    port = free_port()
    proc, lines = serve(tmp_path, port, tmp_path / "log.db")
    try:
        wait_listening(proc, lines)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    time.sleep(0.2)  # the reader thread's last lines
    said = "\n".join(lines)
    assert "Traceback" not in said and "KeyboardInterrupt" not in said, said[-2000:]


def test_a_port_out_of_range_is_refused_not_wrapped(tmp_path: Path) -> None:
    """``--port 70000`` listened on 4464 (the socket layer took it modulo 65536)."""
    import subprocess
    import sys

    from proxy.settings import SettingsError, settings_from_mapping

    done = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "serve", "--port", "70000", "--db",
         str(tmp_path / "log.db")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "a port is 0 to 65535" in done.stderr
    assert "Traceback" not in done.stderr
    try:
        settings_from_mapping({"server": {"port": 70000}})
    except SettingsError as exc:
        assert "server.port" in str(exc)
    else:
        raise AssertionError("server.port 70000 accepted")


def test_a_folder_for_the_log_or_an_upstream_without_scheme_is_one_line(tmp_path: Path) -> None:
    """Each was a traceback: the store's open inside uvicorn's start-up (a lock file left beside
    the folder), pydantic's error for ``--upstream``."""
    import subprocess
    import sys

    folder = tmp_path / "logs"
    folder.mkdir()
    for args, said in (
        (["--db", str(folder)], "the log is a file, and this names a folder"),
        (["--upstream", "api.openai.com/v1", "--db", str(tmp_path / "l.db")],
         "not an http:// or https:// URL"),
    ):  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "proxy.cli", "serve", "--port", "0", *args],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2 and said in done.stderr, done.stderr[-1500:]
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "logs.lock").exists()
