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
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

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


# While a text goes back to the client that sent the request (an upstream's error quoting it):
# whether a quote is the client's own words, which a quote of a secret's start then is not
_own_words: ContextVar[Callable[[str], bool] | None] = ContextVar(
    "ctxproxy_own_words", default=None
)


@contextmanager
def own_words(said: Callable[[str], bool]) -> Iterator[None]:
    """Redact a text going back to a client: a quote of a secret's start that the client's own
    request holds (``said``) stays. Redacted, it would tell the client which of its guesses
    start a secret, a character a request (an upstream quoting the request in its error)."""
    token = _own_words.set(said)
    try:
        yield
    finally:
        _own_words.reset(token)


def to_client() -> bool:
    """Whether the text now redacted goes back to a client (``own_words``): no memo of texts
    redacted otherwise serves it, nor keeps what it gives."""
    return _own_words.get() is not None


def _quoted(said: Callable[[str], bool]) -> Callable[[re.Match[str]], str]:
    return lambda m: m[0] if said(m[0]) else REDACTED


def without_known(text: str) -> str:
    """``text`` with each of the server's own secrets replaced."""
    for value in _known:
        if value in text:
            text = text.replace(value, REDACTED)
    said = _own_words.get()
    for head, run in _heads:
        if head in text:
            text = run.sub(REDACTED if said is None else _quoted(said), text)
    return text
