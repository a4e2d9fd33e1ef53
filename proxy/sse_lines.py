"""An upstream's event stream as litellm's readers can take it: the lines that carry no event
taken off before they read it (``proxy.litellm_answers``).

Every SSE reader skips a comment (``: keep-alive``, as gateways and SSE servers write them), and
a ``retry:`` or ``id:`` field says nothing of the answer; nor does a ``data:`` line with nothing
in it. litellm's readers choke on them: its Gemini reader took a comment for the start of a JSON
value and waited for the rest of it until the stream ended, and the OpenAI SDK it reads OpenAI's
streams with parsed an event of no data as JSON. Either failed the whole answer.

Lines end at ``\\n`` (a ``\\r`` before it is part of the end), as the line bound of
``litellm_answers`` counts them; a line is held until its end comes (a reader waits for it too).
"""

from __future__ import annotations

import re

# a line that carries no event, at a line's start: a comment, a retry or id field, a data field
# with nothing but blanks in it (linear: one alternation, possessive blanks)
_SKIPPED = re.compile(rb"^(?::|retry(?::|\r?$)|id(?::|\r?$)|data:?[ \t]*+\r?$)", re.MULTILINE)


def _kept(lines: bytes) -> bytes:
    """``lines`` without those that carry no event."""
    if _SKIPPED.search(lines) is None:
        return lines
    return b"".join(
        line for line in lines.splitlines(keepends=True) if _SKIPPED.match(line) is None
    )


class SseLines:
    """An event stream's bytes, fed as they come, given back whole lines at a time, the lines
    that carry no event left out."""

    def __init__(self) -> None:
        self._held: list[bytes] = []  # the start of a line whose end has not come

    def feed(self, piece: bytes) -> bytes:
        end = piece.rfind(b"\n")
        if end < 0:
            self._held.append(piece)  # joined once, when the line ends: linear in its length
            return b""
        head = piece[: end + 1]
        if self._held:
            head = b"".join([*self._held, head])
            self._held.clear()
        if end + 1 < len(piece):
            self._held.append(piece[end + 1 :])
        return _kept(head)

    def end(self) -> bytes:
        """What is held at the stream's end: its last line, if it had no end of its own."""
        rest = b"".join(self._held)
        self._held.clear()
        return _kept(rest) if rest else b""
