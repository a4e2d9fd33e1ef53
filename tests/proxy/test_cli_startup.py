"""The commands that only read the store start without the engine, the rules or their packs:
``ctxproxy logs`` answers in a fraction of a second, not the seconds compiling the reference
packs takes (``serve`` and ``rewrite`` still validate every rule's options at start-up)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.cli import main
from proxy.settings import Settings, SettingsError, load_settings


def test_importing_the_command_loads_neither_the_engine_nor_the_rules() -> None:
    heavy = ("proxy.rewrite", "proxy.server", "rules.context", "rules.entities", "rules.packs")
    code = f"import sys, proxy.cli; print(sorted(m for m in sys.modules if m.startswith({heavy})))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_store_commands_do_not_validate_the_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(self: Settings) -> None:
        raise AssertionError("the rules were validated")

    monkeypatch.setattr(Settings, "configured_rules", refuse)
    db = tmp_path / "log.db"
    assert main(["vacuum", "--db", str(db)]) == 2  # no such log: said without the rules
    assert main(["logs", "--db", str(db)]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(AssertionError, match="validated"):
        load_settings(None)  # serve and rewrite: every rule's options, at start-up


def test_serve_and_rewrite_still_refuse_a_bad_rule_option(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("rules:\n  - name: prune\n    target_ratio: lots\n")
    with pytest.raises(SettingsError, match=r"rules\[0\]\.target_ratio"):
        load_settings(cfg)
    assert load_settings(cfg, check_rules=False).store is not None


def test_a_file_that_is_no_database_is_one_line_and_exit_2_for_each_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "garbage.db"
    db.write_bytes(b"not a database " * 600)
    with socket.socket() as taken:  # serve: said before it binds (or starts anything)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        serve = ["serve", "--port", str(taken.getsockname()[1])]
        for command in (["logs"], ["show", "last"], ["vacuum"], serve):
            assert main([*command, "--db", str(db)]) == 2
            err = capsys.readouterr().err
            assert err == "ctxproxy: the request log cannot be read: file is not a database\n"


def test_keys_mode_without_a_key_is_one_line_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "auth: {mode: keys, principals: {alice: [ALICE_KEY]}}\n"
        "upstreams: [{name: o, match: ['*'], api_key_env: UPSTREAM_KEY}]\n"
    )
    monkeypatch.delenv("CTXPROXY_KEYS", raising=False)
    monkeypatch.delenv("ALICE_KEY", raising=False)
    assert main(["serve", "--config", str(cfg), "--db", str(tmp_path / "db")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ctxproxy: auth.mode: keys, but no proxy key is set") and err[-1] == "\n"
    assert err.count("\n") == 1 and not (tmp_path / "db").exists()  # nothing was started
    # the principals are named: the line names their variables, not "name them"
    assert "$ALICE_KEY" in err and "name them under" not in err


@pytest.mark.parametrize(
    ("env", "db", "said"),
    [
        # a driver's scheme: it was opened as a SQLite file of that name, and the lock file's
        # error printed the password
        ("postgresql+asyncpg://ctxproxy:s3cret@db:5432/ctxproxy", None, "CTXPROXY_STORE_URL"),
        ("pg.db", None, "CTXPROXY_STORE_URL"),  # served a SQLite file wherever the shell was
        (None, "mysql://u:s3cret@h/db", "--db"),
    ],
)
def test_a_store_url_that_is_not_postgresqls_is_one_line_without_its_password(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: str | None,
    db: str | None,
    said: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    if env is None:
        monkeypatch.delenv("CTXPROXY_STORE_URL", raising=False)
    else:
        monkeypatch.setenv("CTXPROXY_STORE_URL", env)
    extra = ["--db", db] if db else []
    for command in (["logs"], ["vacuum"], ["serve", "--port", "0"]):
        assert main([*command, *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"ctxproxy: {said}: ") and "is not a postgresql:// URL" in err
        assert "s3cret" not in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []  # nothing was made


def test_flags_that_would_be_ignored_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``logs --cost --follow`` printed once and exited; ``vacuum --retention-days -1`` ran as
    "older than -1 days"."""
    import sqlite3

    db = tmp_path / "log.db"
    sqlite3.connect(db).close()
    assert main(["logs", "--cost", "--follow", "--db", str(db)]) == 2
    assert "--follow does not apply to --cost" in capsys.readouterr().err
    for flag in ("--retention-days", "--session-ttl-days"):
        assert main(["vacuum", flag, "-1", "--db", str(db)]) == 2
        assert f"{flag} must be between 0 and 36500" in capsys.readouterr().err


@pytest.mark.parametrize("interval", ["0", "-1", "nan", "inf", "1e-9"])
def test_a_follow_interval_that_would_spin_or_never_poll_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], interval: str
) -> None:
    """``logs --follow --interval 0`` (or a negative one) polled the log without pause, a core
    busy and the store read as fast as it answered, until Ctrl-C; ``inf`` never polled again."""
    from proxy.cli import build_parser

    args = ["logs", "--follow", "--interval", interval, "--db", str(tmp_path / "log.db")]
    with pytest.raises(SystemExit) as ended:  # refused as it is read: nothing is opened
        build_parser().parse_args(args)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert "argument --interval: seconds from 0.01 to 3600" in err and "Traceback" not in err
