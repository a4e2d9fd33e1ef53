"""Reading the shared trace corpus (../shared/traces/corpus.jsonl.gz) for tests and benchmarks."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "traces" / "corpus.jsonl.gz"


def iter_conversations(path: Path = CORPUS) -> Iterator[dict[str, Any]]:
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
