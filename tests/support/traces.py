"""Reading the shared trace corpus (../shared/traces/corpus.jsonl.gz) for tests and benchmarks."""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

# ../shared beside the checkout: the trace corpus (and agent samples, for the benchmarks). Tests
# that read it carry the ``needs_shared`` marker (tests/conftest.py skips them without it).
# ``CTXPROXY_SHARED`` names it when it is elsewhere (a second worktree of the checkout).


def shared_dir(environ: Mapping[str, str] = os.environ) -> Path:
    return Path(environ.get("CTXPROXY_SHARED") or Path(__file__).resolve().parents[3] / "shared")


SHARED = shared_dir()
CORPUS = SHARED / "traces" / "corpus.jsonl.gz"
SHARED_MISSING = (
    f"needs ../shared beside the checkout ({CORPUS} is missing): the trace corpus; "
    "see the README's Operations and tests"
)


def iter_conversations(path: Path = CORPUS) -> Iterator[dict[str, Any]]:
    if not path.exists():  # a bench run from a checkout without ../shared: say what is missing
        raise SystemExit(SHARED_MISSING if path == CORPUS else f"{path} is missing")
    with gzip.open(path, "rb") as f:
        for line in f:
            if line.strip():
                yield orjson.loads(line)


def request_prefixes(messages: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Each prefix an agent would have sent: everything up to each user or tool turn's end."""
    for i, m in enumerate(messages):
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        if m.get("role") in ("user", "tool") and (nxt is None or nxt.get("role") == "assistant"):
            yield messages[: i + 1]
