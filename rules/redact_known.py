"""Secrets the server itself holds (its proxy keys, its admin key, the upstreams' keys), redacted
wherever a text holds them, by value: whatever their shape or the words around them ("my proxy
key is alice-proxy-key-0001" was stored as said: a key of no known shape, no name before it).
The server names them at start-up (``proxy/known_secrets.py``); a value under ``MIN_CHARS`` is
not one (it would redact ordinary words). A quote of a long one's start (its first ``HEAD_CHARS``
characters and the key characters after them: an upstream echoing ``server-openai-key-XY``, 20
of 25 characters; a file named ``alice-proxy-settings.yaml`` shares 12 with a key and stays)
goes as well: one ``str.find`` a key where no such quote is."""

from __future__ import annotations

import re
from collections.abc import Iterable

MIN_CHARS = 8
HEAD_CHARS = 16  # of a key of at least HEAD_CHARS + 4: its start, quoted without the rest
REDACTED = "[REDACTED]"
_known: tuple[str, ...] = ()
_heads: tuple[tuple[str, re.Pattern[str]], ...] = ()


def set_known(values: Iterable[str]) -> None:
    """The server's own secrets, from now on (longest first: one holding another goes whole)."""
    global _known, _heads
    kept = {v.strip() for v in values if len(v.strip()) >= MIN_CHARS}
    _known = tuple(sorted(kept, key=lambda v: (-len(v), v)))
    heads = sorted({v[:HEAD_CHARS] for v in _known if len(v) >= HEAD_CHARS + 4})
    # the head and the key characters after it (linear: one possessive run)
    _heads = tuple((h, re.compile(re.escape(h) + r"[A-Za-z0-9_\-+/=~]*+")) for h in heads)


def without_known(text: str) -> str:
    """``text`` with each of the server's own secrets replaced."""
    for value in _known:
        if value in text:
            text = text.replace(value, REDACTED)
    for head, run in _heads:
        if head in text:
            text = run.sub(REDACTED, text)
    return text
