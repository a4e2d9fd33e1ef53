"""An HTTP ``Authorization: Digest …`` header's credentials, for ``rules.redact_triggers``: a
list of ``name="value"`` parameters whose quotes end no credential (read to a quote, the
``username`` went and the ``response``, a hash of the password that a dictionary cracks, stayed).
The parameters go as one; a JSON string's escaped quotes (``\\"``) are read as quotes. Linear:
32 parameters at most, each of bounded length."""

from __future__ import annotations

import re

_PARAMS = re.compile(
    r"""(?:[A-Za-z][\w-]{0,31}+[ \t]*+=[ \t]*+"""
    r"""(?:\\{0,7}"[^"\\\r\n]{0,512}+\\{0,7}"|[^\s,"\\]{1,512}+)(?:[ \t]*+,[ \t]*+)?){1,32}+"""
)


def digest_span(text: str, start: int) -> tuple[int, int, int] | None:
    """(start, end) of the Digest parameters at ``start``, and where the scan goes on; None when
    none is there."""
    m = _PARAMS.match(text, start)
    if m is None:
        return None
    end = m.end()
    while end > start and text[end - 1] in " \t,":
        end -= 1
    return start, end, m.end()
