"""One ``ctxproxy serve`` per SQLite file: a second on the same file is refused in one line with
exit 2 before it opens anything (each would overwrite the other's sessions), while ``logs``,
``show`` and ``vacuum`` go on working beside it; ``vacuum --full``, which would hold the file's
write lock while the server writes, is refused. Once the server has stopped, its file is free."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from proxy.cli import main
from tests.support.live import free_port
from tests.support.serve_cli import serve, wait_listening


def test_a_second_server_on_one_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "log.db"
    first, first_lines = serve(tmp_path, free_port(), db)
    second = None
    try:
        wait_listening(first, first_lines)
        second, lines = serve(tmp_path, free_port(), db)
        assert second.wait(timeout=60) == 2
        time.sleep(0.1)  # the reader thread has the last lines
        assert len(lines) == 1 and "listening on" not in lines[0], lines
        assert lines[0].startswith(f"ctxproxy: another ctxproxy serve (pid {first.pid}) is using ")
        assert str(db) in lines[0] and "PostgreSQL" in lines[0]
        assert first.poll() is None  # the first one serves on
        assert main(["logs", "--db", str(db)]) == 0
        assert main(["vacuum", "--db", str(db)]) == 0
        capsys.readouterr()
        assert main(["vacuum", "--full", "--db", str(db)]) == 2
        assert "a ctxproxy serve is using" in capsys.readouterr().err
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
    assert main(["vacuum", "--full", "--db", str(db)]) == 0  # the lock went with the server


def test_the_lock_is_the_files_not_the_working_directorys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proxy.store.serve_lock import ServeLockError, hold, serving

    monkeypatch.chdir(tmp_path)
    held = hold("log.db")
    assert held is not None and (tmp_path / "log.db.lock").read_text() == f"{os.getpid()}\n"
    try:
        with pytest.raises(ServeLockError, match=f"pid {os.getpid()}"):
            hold(str(tmp_path / "log.db"))  # the same file, named otherwise
        assert serving(str(tmp_path / "log.db"))
    finally:
        held.close()
    assert not serving("log.db")
    assert hold(":memory:") is None and hold("postgresql://u@h/db") is None


def test_an_older_file_is_not_rewritten_under_a_running_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    from proxy.store.serve_lock import hold

    db = tmp_path / "log.db"
    with sqlite3.connect(db) as conn:  # a file from before auto_vacuum was set
        conn.execute("CREATE TABLE t (x)")
    held = hold(str(db))  # as a running server holds it
    try:
        assert main(["vacuum", "--db", str(db)]) == 0
        assert "not compacted: the file predates incremental vacuum" in capsys.readouterr().out
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA auto_vacuum").fetchone() == (0,)  # not rewritten
    finally:
        assert held is not None
        held.close()
    assert main(["vacuum", "--db", str(db)]) == 0
    assert "vacuum: " in capsys.readouterr().out  # converted, once the server has stopped
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (2,)


def test_serve_makes_the_folder_of_a_new_log_as_the_other_commands_do(tmp_path: Path) -> None:
    """``serve --db data/ctxproxy.db`` without ``data/`` was refused (``cannot make the lock file
    …: No such file or directory``) while ``migrate`` and ``rewrite`` made the folder (0700) and
    the log in it: the lock file was made before the store."""
    db = tmp_path / "data" / "logs" / "log.db"
    proc, lines = serve(tmp_path, free_port(), db)
    try:
        wait_listening(proc, lines)
        assert db.is_file() and (db.parent / "log.db.lock").is_file()
        for folder in (db.parent, db.parent.parent):  # its owner's alone, as the store makes it
            assert folder.stat().st_mode & 0o777 == 0o700
    finally:
        proc.terminate()
        proc.wait(timeout=10)
