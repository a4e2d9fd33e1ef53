"""``ctxproxy serve`` says, in one line at start-up, what a newcomer needs: version, address,
where each model goes (patterns and kind, never a key), the database and the /ui address."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

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
