"""``ctxproxy serve`` as a child process, its stderr's lines gathered as they come."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path


def serve(
    tmp_path: Path, port: int, db: Path, config: str = ""
) -> tuple[subprocess.Popen[str], list[str]]:
    path = tmp_path / "config.yaml"
    path.write_text("logging:\n  json_lines: false\n" + config)
    args = ["serve", "--config", str(path), "--port", str(port), "--db", str(db)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", *args],
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stderr or []), daemon=True).start()
    return proc, lines


def wait_listening(proc: subprocess.Popen[str], lines: list[str], timeout: float = 60) -> None:
    """Until the start-up line is said (the server accepts connections)."""
    deadline = time.time() + timeout
    while not any("listening on" in line for line in lines):
        assert proc.poll() is None and time.time() < deadline, lines
        time.sleep(0.01)
