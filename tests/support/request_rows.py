"""A request's log row read from a live proxy's SQLite file, once the writer has completed it."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any


def completed_row(db: Path, request_id: str, timeout: float = 10.0) -> dict[str, Any]:
    """The request's row once it is complete (the writer batches its writes)."""
    deadline = time.monotonic() + timeout
    while True:
        with sqlite3.connect(db) as conn:
            conn.row_factory = sqlite3.Row
            found = conn.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
        if found is not None and found["status"] is not None:
            return dict(found)
        assert time.monotonic() < deadline, f"no complete row for {request_id}"
        time.sleep(0.05)
