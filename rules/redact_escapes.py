"""Keys written with JSON's ``\\u00XX`` escapes (``sk\\u002dproj-…``, ``ghp\\u005f…``, a key
escaped whole), for ``rules.redact``: a serialiser that escapes more than it must, or a text
hiding a key from a scan of its plain shape. The run of a key's alphabet and such escapes around
each escape is read decoded; where that holds a key's shape, the run goes whole. Linear: each
escape's run is read once (from at most 64 characters before it), and the scan goes on past it."""

from __future__ import annotations

import re

from rules.redact_shapes import REDACTED, redact_key_shapes

_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
# a key's characters and printable ASCII escaped (0x20-0x7e); each step one or the other
_RUN = re.compile(r"(?:[A-Za-z0-9_\-]|\\u00[2-7][0-9a-fA-F])++")
_ESCAPE = re.compile(r"\\u00([2-7][0-9a-fA-F])")
_MARK = "\\u00"


def _is_key(run: str) -> bool:
    plain = _ESCAPE.sub(lambda e: chr(int(e[1], 16)), run)
    return redact_key_shapes(plain) != plain


def redact_escaped_keys(text: str) -> str:
    """``text`` with each escaped run that decodes to a key's shape replaced by REDACTED."""
    at = text.find(_MARK)
    if at < 0:
        return text
    out: list[str] = []
    done = 0  # text before this is written out (or redacted)
    while at >= 0:
        left = at
        while left > max(done, at - 64) and text[left - 1] in _ALPHABET:
            left -= 1
        m = _RUN.match(text, left)
        end = m.end() if m is not None else at + len(_MARK)
        if m is not None and end > at and _is_key(m[0]):
            out += [text[done:left], REDACTED]
            done = end
        at = text.find(_MARK, max(end, at + 1))
    out.append(text[done:])
    return "".join(out)
