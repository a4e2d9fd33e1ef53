"""A picture for the agents to read in the end-to-end tests: a real 1 × 1 PNG on disk."""

from __future__ import annotations

import base64
from pathlib import Path

# a 1 × 1 red PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def picture(workdir: Path, name: str = "shot.png") -> Path:
    """``PNG`` written as ``name`` in ``workdir`` (made if missing)."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / name
    path.write_bytes(PNG)
    return path
