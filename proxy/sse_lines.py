"""An upstream's event stream as litellm's readers can take it: the lines that carry no event
taken off before they read it (``proxy.litellm_answers``).

Every SSE reader skips a comment (``: keep-alive``, as gateways and SSE servers write them), and
a ``retry:`` or ``id:`` field says nothing of the answer; nor does a ``data:`` line with nothing
in it. litellm's readers choke on them: its Gemini reader took a comment for the start of a JSON
value and waited for the rest of it until the stream ended, and the OpenAI SDK it reads OpenAI's
streams with parsed an event of no data as JSON. Either failed the whole answer. So an event's
``event:`` line is held until a line of its data comes, and left out with an event that has none
(one of no data is no event, as the SSE standard has it; the readers made one of its type).
A keep-alive event (``event: ping``, ``keepalive``, ``heartbeat``) is left out whole, whatever
its data: no protocol's answer is in one, and the readers parsed its data (``data: keepalive``)
as JSON, which failed the answer.

Lines end at ``\\n`` (a ``\\r`` before it is part of the end), as the line bound of
``litellm_answers`` counts them; a line is held until its end comes (a reader waits for it too).
"""

from __future__ import annotations

import re

# a line that carries no event, at a line's start: a comment, a retry or id field, a data field
# with nothing but blanks in it (linear: one alternation, possessive blanks)
_SKIPPED = re.compile(rb"^(?::|retry(?::|\r?$)|id(?::|\r?$)|data:?[ \t]*+\r?$)", re.MULTILINE)


# an event's type, at a line's start: said only once a line of its data comes (an event of no
# data is none, as the SSE standard has it; the readers made one of its type and parsed its
# empty data as JSON)
_TYPE = re.compile(rb"^event(?::|\r?$)", re.MULTILINE)
# a keep-alive event's type line (bounded: one optional blank, a fixed alternation)
_IDLE = re.compile(rb"event: ?(?:ping|keep-?alive|heartbeat)\r?\n?\Z")


class SseLines:
    """An event stream's bytes, fed as they come, given back whole lines at a time, the lines
    that carry no event left out."""

    def __init__(self) -> None:
        self._held: list[bytes] = []  # the start of a line whose end has not come
        self._type = b""  # the event's type line, until a line of its data comes
        self._data = False  # whether the event has had a line of its data
        self._idle = False  # within a keep-alive event: its lines left out

    def _kept(self, lines: bytes) -> bytes:
        """``lines`` without those that carry no event."""
        if (
            not self._type
            and not self._idle
            and _SKIPPED.search(lines) is None
            and _TYPE.search(lines) is None
        ):
            body = lines[:-1] if lines.endswith(b"\n") else lines
            self._data = bool(body[body.rfind(b"\n") + 1 :].rstrip(b"\r"))  # its last line's
            return lines
        kept: list[bytes] = []
        for line in lines.splitlines(keepends=True):
            if _SKIPPED.match(line) is not None:
                continue
            if _TYPE.match(line) is not None and not self._data:
                self._type = line  # the last one names the event
                self._idle = _IDLE.match(line) is not None
                continue
            data = bool(line.rstrip(b"\r\n"))  # else a blank line: the event's end
            if self._idle and data:
                continue
            self._idle = False
            if data and self._type:
                kept.append(self._type)
            self._type, self._data = b"", data
            kept.append(line)
        return b"".join(kept)

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
        return self._kept(head)

    def end(self) -> bytes:
        """What is held at the stream's end: its last line, if it had no end of its own."""
        rest = b"".join(self._held)
        self._held.clear()
        return self._kept(rest) if rest else b""
