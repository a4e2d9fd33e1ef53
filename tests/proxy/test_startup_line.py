"""``ctxproxy serve`` says, in one line at start-up, what a newcomer needs: version, address,
where each model goes (patterns and kind, never a key), the database and the /ui address."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from proxy import __version__

SECRET = "sk-startup-secret-0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_prints_one_line_with_what_a_newcomer_needs(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "logging:\n  json_lines: false\n"
        "upstreams:\n"
        "  - {name: claude, match: ['anthropic/*'], kind: litellm, api_key_env: STARTUP_KEY}\n"
        "  - {name: local, match: ['*'], base_url: 'http://127.0.0.1:9/v1'}\n"
    )
    port = _free_port()
    db = tmp_path / "log.db"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "STARTUP_KEY": SECRET}
    args = ["serve", "--config", str(config), "--port", str(port), "--db", str(db)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", *args],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or []), daemon=True)
    reader.start()
    try:
        deadline = time.time() + 60
        while not any("listening on" in line for line in lines):
            assert proc.poll() is None and time.time() < deadline, lines
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    (line,) = [line for line in lines if "listening on" in line]
    assert f"ctxproxy {__version__}" in line
    assert f"http://127.0.0.1:{port}" in line and f"http://127.0.0.1:{port}/ui" in line
    assert "claude (litellm/anthropic): anthropic/*" in line
    assert "local (openai): *" in line
    assert str(db.resolve()) in line
    assert "loopback clients only" in line  # who may open /ui, on the same line
    assert SECRET not in "".join(lines)


def test_the_line_names_each_upstreams_url_never_a_password(tmp_path: Path) -> None:
    from proxy.settings import settings_from_mapping
    from proxy.startup import startup_line

    settings = settings_from_mapping(
        {
            "upstreams": [
                {"name": "claude", "match": ["claude-*"], "kind": "anthropic"},
                {"name": "mine", "match": ["*"], "base_url": "https://u:hunter2@llm.example/v1"},
            ]
        }
    )
    line = startup_line(settings, "127.0.0.1", 8787, str(tmp_path / "x.db"))
    assert "claude (anthropic): claude-* -> https://api.anthropic.com" in line
    assert "mine (openai): * -> https://u:***@llm.example/v1" in line
    assert "hunter2" not in line


def test_a_relative_store_path_is_the_config_files_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proxy.settings import load_settings

    (tmp_path / "conf").mkdir()
    config = tmp_path / "conf" / "c.yaml"
    config.write_text("store:\n  path: data/log.db\n")
    monkeypatch.chdir(tmp_path)  # wherever a command runs from
    assert load_settings(config).store.path == str(tmp_path / "conf" / "data" / "log.db")
    config.write_text("ui:\n  public: false\n")  # the default path too
    assert load_settings(config).store.path == str(tmp_path / "conf" / "ctxproxy.db")
    config.write_text("store:\n  path: /abs/log.db\n")
    assert load_settings(config).store.path == "/abs/log.db"
    assert load_settings(None).store.path == "ctxproxy.db"  # no file: the working directory


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("json_lines", "terminal", "want_json"),
    [("auto", True, False), ("auto", False, True), (True, True, True), (False, False, False)],
)
def test_json_lines_auto_is_text_on_a_terminal(
    json_lines: object, terminal: bool, want_json: bool
) -> None:
    from proxy.settings import LoggingSettings
    from proxy.telemetry.jsonlog import use_json

    stream = _Terminal() if terminal else io.StringIO()
    assert use_json(LoggingSettings(json_lines=json_lines), stream) is want_json  # type: ignore[arg-type]


def test_bin_ctxproxy_reads_the_database_bin_serve_writes(tmp_path: Path) -> None:
    """bin/ctxproxy runs any command on bin/serve's config, so on its database, from anywhere."""
    import sqlite3

    root = Path(__file__).resolve().parents[2]
    config = tmp_path / "c.yaml"
    config.write_text("store:\n  path: log.db\n")
    from proxy.store.migrations import MIGRATIONS

    with sqlite3.connect(tmp_path / "log.db") as db:  # a database as the server leaves it
        db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        for name, sql in MIGRATIONS:
            db.executescript(sql)
            db.execute("INSERT INTO _migrations VALUES (?, datetime('now'))", (name,))
        db.execute(
            "INSERT INTO requests (id, created_at, session_id, principal, model, status) "
            "VALUES ('req_from_serve', 1.0, 'anonymous/s', 'anonymous', 'gpt-4o', 200)"
        )
    if sys.prefix == sys.base_prefix:
        pytest.skip("bin/ctxproxy uses a virtual environment; the tests run outside one")
    env = {**os.environ, "CTXPROXY_VENV": sys.prefix, "CTXPROXY_CONFIG": str(config)}
    out = subprocess.run(
        [str(root / "bin" / "ctxproxy"), "logs", "--json"],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "req_from_serve" in out.stdout


def test_no_upstream_says_how_to_give_the_models_somewhere_to_go() -> None:
    """``ctxproxy serve`` without a config listened with "upstreams: none", and every model then
    got a 404 with no hint."""
    from proxy.settings import settings_from_mapping
    from proxy.startup import startup_line

    line = startup_line(settings_from_mapping({}, check_rules=False), "127.0.0.1", 8787, ":memory:")
    hint = "upstreams: none (every model is refused: start it with --config FILE or --upstream"
    assert hint in line


def test_a_config_without_upstreams_says_so() -> None:
    """Given ``--config``, the hint said to start it with ``--config FILE``."""
    from proxy.settings import settings_from_mapping
    from proxy.startup import startup_line

    settings = settings_from_mapping({}, check_rules=False)
    line = startup_line(settings, "127.0.0.1", 8787, ":memory:", "team.yaml")
    assert "team.yaml has no upstreams: section; add one, or start it with --upstream URL" in line


def test_a_server_bound_to_every_address_names_no_wildcard_page() -> None:
    """A container binds 0.0.0.0: ``http://0.0.0.0:8790/ui`` is no address a browser opens."""
    from proxy.settings import settings_from_mapping
    from proxy.startup import startup_line

    settings = settings_from_mapping({})
    for host in ("0.0.0.0", "::"):
        line = startup_line(settings, host, 8790, ":memory:", None)
        assert "ui: http://<this host>:8790/ui" in line
    assert "ui: http://127.0.0.1:8790/ui" in startup_line(
        settings, "127.0.0.1", 8790, ":memory:", None
    )
