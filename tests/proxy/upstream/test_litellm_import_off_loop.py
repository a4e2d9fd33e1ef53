"""litellm's first import takes seconds: made on the event loop by the first bridged request of a
process, every other request waited it out (the loop held 2.4 s). It is made in a worker thread
(``proxy.providers.litellm_ready``); the loop keeps answering."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_first_bridged_request_leaves_the_loop_free() -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "tests.support.first_bridged_request"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    status, lag_ms = ran.stdout.split()[-2:]
    assert status == "200", ran.stderr[-2000:]
    assert int(lag_ms) < 1000, f"the loop was held {lag_ms} ms"
