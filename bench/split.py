"""The corpus split in two halves by a hash of each conversation's id: what prune's schedule
learns from the corpus (``bench/survival.py``'s pack) is learned on ``train``, and ``bench.cost``
and ``bench.schedule_gap`` report ``held-out`` (``--half``) on conversations it never saw.

The hash (SHA-256 of the id, its first byte's parity) depends on nothing but the id, so a
conversation's half never changes as the corpus grows."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

HALVES = ("train", "held-out")


def half_of(conv_id: str) -> str:
    """``train`` or ``held-out``."""
    return HALVES[hashlib.sha256(conv_id.encode("utf-8")).digest()[0] & 1]


def in_half(convs: Iterable[dict[str, Any]], half: str | None) -> list[dict[str, Any]]:
    """The conversations of ``half`` (all of them for None or ``all``)."""
    if half in (None, "all"):
        return list(convs)
    if half not in HALVES:
        raise ValueError(f"unknown half {half!r}; known: {', '.join(HALVES)}")
    return [c for c in convs if half_of(str(c["id"])) == half]
