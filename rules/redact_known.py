"""Secrets the server itself holds (its proxy keys, its admin key, the upstreams' keys), redacted
wherever a text holds them, by value: whatever their shape or the words around them ("my proxy
key is alice-proxy-key-0001" was stored as said: a key of no known shape, no name before it).
The server names them at start-up (``proxy/known_secrets.py``); a value under ``MIN_CHARS`` is
not one (it would redact ordinary words)."""

from __future__ import annotations

from collections.abc import Iterable

MIN_CHARS = 8
REDACTED = "[REDACTED]"
_known: tuple[str, ...] = ()


def set_known(values: Iterable[str]) -> None:
    """The server's own secrets, from now on (longest first: one holding another goes whole)."""
    global _known
    kept = {v.strip() for v in values if len(v.strip()) >= MIN_CHARS}
    _known = tuple(sorted(kept, key=lambda v: (-len(v), v)))


def without_known(text: str) -> str:
    """``text`` with each of the server's own secrets replaced."""
    for value in _known:
        if value in text:
            text = text.replace(value, REDACTED)
    return text
