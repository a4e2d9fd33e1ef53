"""Lone UTF-16 surrogate escapes in a request body, mended once the body failed to parse.

A JavaScript client that cuts a string between the two halves of a surrogate pair (a tool's
output truncated at N code units, an emoji at the cut) serialises the half left as ``"\\ud83d"``:
well-formed ``JSON.stringify`` escapes it. Such a body is not valid Unicode: orjson refuses it,
and so do the providers (Anthropic: 400 "no low surrogate in string"), on every retry while the
text stays in the history. Each lone surrogate becomes U+FFFD (raw UTF-8), as a decoder would
make of it; a pair, and every other byte, is left as it came, so the mended body is the same on
every request of the conversation and its prefix stays cached.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_HEX = rb"[0-9a-fA-F]"
# A high half no low half follows, or a low half no high half precedes: a pair is never matched,
# so a body full of escaped emoji costs one search. Fixed-width look-arounds: linear. A pair
# after a backslash (``pair``, the high half) is a pair only when that backslash does not escape
# the high half's: \\ud83d\udc00 is the text \ud83d, then a lone low half.
_LONE = re.compile(
    rb"\\u[dD](?:[89abAB]" + _HEX + rb"{2}(?:(?!\\u[dD][c-fC-F])"
    rb"|(?P<pair>(?<=\\\\u[dD][89abAB]" + _HEX + rb"{2})(?=\\u[dD][c-fC-F]" + _HEX + rb"{2})))"
    rb"|(?<!\\u[dD][89abAB]" + _HEX + rb"{2}\\u[dD])[c-fC-F]" + _HEX + rb"{2})"
)
_ESCAPE = 6  # the bytes of one \uXXXX
# The quick test: only a body holding one of these can hold a surrogate escape.
_MARKS = (b"\\ud", b"\\uD")
# U+FFFD as orjson writes it (raw UTF-8, not the escape): the body memory proves a kept item by
# its bytes being orjson's, so the next request of the conversation reuses the mended prefix
_REPLACEMENT = "\ufffd".encode()
_BACKSLASH = 0x5C
# The scan goes a window at a time: one C call on a 16 MiB body of backslashes holds the
# interpreter lock for most of a second; one on a window, a few milliseconds.
_WINDOW = 256 * 1024
_REACH = 16  # the longest look-ahead past a match's start (a high half, then a low half's start)
# A body holding more candidates than this, or a backslash run longer than ``_MAX_RUN`` before
# one, is not mended (its parse's 400 stands): a real client's text holds a few cut emoji, and a
# hostile 32 MiB of lone halves cost 5 s and 1 GB to mend piece by piece.
_MAX_CANDIDATES = 4096
_MAX_RUN = 4096


def _escaped(raw: bytes, start: int) -> bool:
    """Whether the backslash at ``start`` is itself escaped (an odd run of backslashes before
    it): ``\\\\ud83d`` is the text ``\\ud83d``, no escape. The runs walked are disjoint."""
    i = start
    while i > 0 and raw[i - 1] == _BACKSLASH:
        i -= 1
        if start - i > _MAX_RUN:
            raise _TooMany
    return (start - i) % 2 == 1


def _lone(raw: bytes) -> Iterator[re.Match[bytes]]:
    """``_LONE``'s matches in ``raw``, found a window at a time (a look-behind sees before the
    window's start; each window is searched ``_REACH`` bytes past its end for what starts in
    it)."""
    start = 0
    while start < len(raw):
        end = start + _WINDOW
        for match in _LONE.finditer(raw, start, end + _REACH):
            if match.start() >= end:
                break
            yield match
            end = max(end, match.end())
        start = end


def may_hold_surrogates(raw: bytes) -> bool:
    """Whether ``raw`` holds a surrogate escape at all (the common body holds no ``\\ud``)."""
    return any(mark in raw for mark in _MARKS)


def mended_surrogates(raw: bytes) -> tuple[bytes, int]:
    """``raw`` with each lone surrogate escape replaced by ``\\ufffd``, and how many were; the
    same bytes object when there was none."""
    if not may_hold_surrogates(raw):
        return raw, 0
    pieces: list[bytes] = []
    done = 0
    try:
        for seen, match in enumerate(_lone(raw)):
            if seen >= _MAX_CANDIDATES:
                raise _TooMany
            start = match.start()
            escaped = _escaped(raw, start)
            if match.group("pair") is not None:
                if not escaped:
                    continue  # a pair after an escaped backslash
                start = match.end()  # the high half is text: the low half after it is lone
            elif escaped:
                continue
            pieces += (raw[done:start], _REPLACEMENT)
            done = start + _ESCAPE
    except _TooMany:
        return raw, 0
    if not pieces:
        return raw, 0
    pieces.append(raw[done:])
    return b"".join(pieces), len(pieces) // 2


class _TooMany(Exception):
    """More to mend than a real client's text holds (``_MAX_CANDIDATES``, ``_MAX_RUN``)."""
