"""Model context windows from litellm's bundled model metadata, read straight from the installed
package folder (importing litellm costs seconds; the request path must not pay that). Loaded once
and cached. Config ``pipeline.context_windows`` wins over this table (see ``Engine.budget_for``)."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

TABLE = "model_prices_and_context_window_backup.json"


def _table_path() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / TABLE
    return path if path.is_file() else None


@lru_cache(maxsize=1)
def _windows() -> dict[str, int]:
    path = _table_path()
    if path is None:
        return {}
    try:
        data: dict[str, Any] = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    out: dict[str, int] = {}
    for name, meta in data.items():
        if not isinstance(meta, dict):
            continue
        window = meta.get("max_input_tokens") or meta.get("max_tokens")
        if isinstance(window, int) and window > 0:
            out[name] = window
    return out


@lru_cache(maxsize=1024)
def context_window(model: str) -> int | None:
    """The model's input window in tokens, or None when litellm's table does not know it.

    Tries the name as given, then without its provider prefix (``openai/gpt-4o`` → ``gpt-4o``)."""
    table = _windows()
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
        candidates.append(model.rsplit("/", 1)[1])
    for name in candidates:
        if name in table:
            return table[name]
    return None
