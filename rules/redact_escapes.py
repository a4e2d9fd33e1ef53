"""Keys written with JSON's ``\\u00XX`` escapes (``sk\\u002dproj-…``, ``ghp\\u005f…``), for
``rules.redact``: a serialiser that escapes more than it must, or a text hiding a key from a
scan of its plain shape. A run of a key's alphabet holding such escapes is read decoded; where
that holds a key's shape, the run goes whole. Linear: the run's parts are bounded and a
backslash ends each."""

from __future__ import annotations

import re

from rules.redact_shapes import REDACTED, redact_key_shapes

# printable ASCII escaped (0x20-0x7e), between runs of a key's alphabet
_ESCAPED_RUN = re.compile(
    r"[A-Za-z0-9_\-]{0,64}(?:\\u00[2-7][0-9a-fA-F][A-Za-z0-9_\-]{0,256}){1,32}"
)
_ESCAPE = re.compile(r"\\u00([2-7][0-9a-fA-F])")


def _judged(m: re.Match[str]) -> str:
    run = m[0]
    plain = _ESCAPE.sub(lambda e: chr(int(e[1], 16)), run)
    return REDACTED if redact_key_shapes(plain) != plain else run


def redact_escaped_keys(text: str) -> str:
    """``text`` with each escaped run that decodes to a key's shape replaced by REDACTED."""
    if "\\u00" not in text:
        return text
    return _ESCAPED_RUN.sub(_judged, text)
