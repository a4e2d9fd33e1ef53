"""Reads ``usage`` out of a relayed SSE stream without touching the bytes sent to the client, in
each protocol's spelling: Chat Completions (a chunk's ``usage``), Anthropic Messages
(``message_start``'s ``message.usage``, then ``message_delta``'s ``usage`` merged over it),
Responses (``response.completed``'s ``response.usage``) and Gemini (each chunk's
``usageMetadata``). It also notes the first error event a provider sends inside a stream it
began as a success (``error``: Anthropic's ``overloaded_error``, a chat chunk's ``error``, a
Responses ``error`` or ``response.failed``, Gemini's ``error``; ``error_events`` says which are;
an event named ``error`` whose data is plain text too), so the log row says so.

Lines end in LF, CRLF or CR (the SSE spec allows all three); a blank line ends an event. Each
chunk is scanned once, so a stream costs time linear in its size, and what is held between
chunks (an unfinished line, the current event's data) is capped at ``MAX_PENDING`` bytes. Of an
event larger than that (a ``response.completed`` echoes the whole response: output, tools,
instructions) only the last ``MAX_PENDING / 2`` bytes or more are kept, where its ``usage``
object sits (near the end), and that object is read from there."""

from __future__ import annotations

import re
from typing import Any

from proxy.upstream.error_events import ERROR_NAMES, data_objects, error_event
from proxy.upstream.usage import last_usage

MAX_PENDING = 64 * 1024
_LINE_END = re.compile(rb"\r\n|\r|\n")
_TAIL_KEPT = MAX_PENDING // 2
_DIAGNOSTICS = ("diagnostics", "prompt_cache_diagnostics")  # Anthropic's, OpenAI Responses'
# An oversized event's start that says it is an error event (its whole cannot be read): a type
# naming one, or a non-null ``error`` object first
_ERROR_START = re.compile(
    rb'\s*\{\s*(?:"(?:type|object)"\s*:\s*"(?:error|response\.failed)"|"error"\s*:\s*\{)'
)
# its kind: the error object's own code or type, else the event's type
_ERROR_KINDS = (
    re.compile(rb'"error"\s*:\s*\{[^{}]{0,256}?"(?:code|type)"\s*:\s*"([A-Za-z0-9_.\-]{1,64})"'),
    re.compile(rb'"type"\s*:\s*"([A-Za-z0-9_.\-]{1,64})"'),
)
_START_KEPT = 512  # bytes of an oversized event's data kept from its start
# an event named as an error (``event: error``), whatever its data: possessive, linear
_ERROR_NAME = re.compile(rb"(?:^|\n)event:[ \t]*+(?:error|response\.failed)[ \t]*+(?:\n|$)")
_MAX_SAID = 2000  # characters of an error event's data noted (as ``error_event`` keeps)


class UsageTap:
    """Feed it the raw chunks; afterwards ``usage`` holds the answer's usage: the last non-null
    one seen, with an Anthropic ``message_delta``'s merged over its ``message_start``'s. Each
    change is a new dict, so a caller can tell by identity that it changed."""

    def __init__(self) -> None:
        self._line = bytearray()  # the unfinished last line
        self._data: list[bytes] = []  # the current event's data lines
        self._data_size = 0
        self._oversized = False  # the current event went over MAX_PENDING: only its tail is kept
        self._tail = bytearray()  # an oversized event's last bytes (raw lines, not joined)
        self._mid_line = False  # an oversized line was cut: the next bytes still belong to it
        self._skip_lf = False  # the previous chunk ended in CR: a leading LF belongs to it
        self._name = b""  # the current event's name (its ``event:`` line)
        self._start = b""  # an oversized event's first data bytes: whether it is an error
        self.usage: dict[str, Any] | None = None
        self.events = 0
        # the answer's id (``message_start``'s message, a Responses event's response) and the
        # provider's cache diagnosis where an event carries one (``proxy.attribution``)
        self.answer_id: Any = None
        self.diagnostics: dict[str, Any] | None = None
        self.error: str | None = None  # the first error event: "<its type or code>: <message>"

    @property
    def pending_bytes(self) -> int:
        return len(self._line) + self._data_size + len(self._tail)

    def feed(self, chunk: bytes) -> None:
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._skip_lf = chunk[-1:] == b"\r"
        if self._line or self._data or self._mid_line or self._oversized:
            self._lines(chunk)  # an event (or a line) begun in an earlier chunk
            return
        # At a line's start with no data held: each whole event without a ``"usage`` is only
        # counted (nothing of it is read), found by its blank line in C, not line by line.
        # Every line end made LF (``\r\n`` first: one line end; a CR ending the chunk is one
        # too, its LF skipped above when it comes), the lines are those ``_LINE_END`` splits.
        text = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *events, rest = text.split(b"\n\n")
        for event in events:
            if b'"usage' not in event and b'"error' not in event and not _named_error(event):
                if event.startswith(b"data:") or b"\ndata:" in event:
                    self.events += 1  # a blank line after data: an event (without usage)
            elif len(event) > MAX_PENDING:
                self._lines(event + b"\n\n")  # its tail kept, as any event this large
            else:
                data = [line[5:] for line in event.split(b"\n") if line.startswith(b"data:")]
                if data:
                    self.events += 1
                    self._dispatch(data)
                    if self.error is None and _named_error(event):
                        self._note_named_error(_event_name(event), data)
        if rest:
            self._lines(rest)

    def _lines(self, chunk: bytes) -> None:
        """``chunk`` read line by line, from where the previous one left off."""
        *complete, rest = _LINE_END.split(chunk)
        for i, line in enumerate(complete):
            if i == 0 and (self._line or self._mid_line):
                line = bytes(self._line) + line
                self._line.clear()
                if self._mid_line:  # the end of a line already cut to the tail: no blank line
                    self._mid_line = False
                    self._keep_tail(line)
                    continue
            self._take(line)
        if self.pending_bytes + len(rest) > MAX_PENDING:
            line = bytes(self._line) + rest
            self._overflow(line[5:] if line.startswith(b"data:") else b"")
            self._keep_tail(line)
            self._line.clear()
            self._mid_line = True
        else:
            self._line += rest

    def _take(self, line: bytes) -> None:
        if not line:  # a blank line ends the event
            if self._data or self._oversized:
                self.events += 1
            if self._oversized:
                self._read_tail()
                self._note_oversized_error()
            elif self._data:
                self._dispatch(self._data)
                self._note_named_error(self._name, self._data)
            self._data.clear()
            self._data_size = 0
            self._oversized = False
            self._tail.clear()
            self._name = self._start = b""
            return
        if not line.startswith(b"data:"):
            if line.startswith(b"event:"):
                self._name = line[6:].strip()[:64]
            return
        if self._oversized:
            self._keep_tail(line[5:])
            return
        if self._data_size + len(line) > MAX_PENDING:
            self._overflow(line[5:])
            self._keep_tail(line[5:])
            return
        self._data.append(line[5:])
        self._data_size += len(line)

    def _overflow(self, more: bytes = b"") -> None:
        """The current event is too large to keep whole: from here on keep its tail only (and
        its start, which says whether it is an error event). ``more``: the data coming next."""
        if not self._oversized:
            self._oversized = True
            self._start = (b"".join(self._data) + more[:_START_KEPT])[:_START_KEPT]
            for part in self._data:
                self._keep_tail(part)
            self._data.clear()
            self._data_size = 0

    def _note_oversized_error(self) -> None:
        """An error event too large to read whole (a ``response.failed`` echoing the request)
        is still one: the row records its kind, as its start or name says."""
        if self.error is not None:
            return
        if self._name in ERROR_NAMES or _ERROR_START.match(self._start):
            found = next((m[1] for p in _ERROR_KINDS if (m := p.search(self._start))), None)
            named = (found or self._name or b"error").decode("utf-8", "replace")
            self.error = f"{named}: (an error event too large to read whole)"

    def _note_named_error(self, name: bytes, data: list[bytes]) -> None:
        """An event named as an error whose data is no error object (plain text, a gateway's
        page) is an error all the same, to the SDKs and to the scanner: the row records it."""
        if self.error is None and name in ERROR_NAMES:
            text = b"\n".join(d[1:] if d.startswith(b" ") else d for d in data)
            said = text.decode("utf-8", "replace")
            self.error = f"{name.decode('utf-8', 'replace')}: {said}"[:_MAX_SAID]

    def _keep_tail(self, data: bytes) -> None:
        # trimmed to half the cap once past it, so each byte is moved a bounded number of times
        self._tail += data
        if len(self._tail) > MAX_PENDING:
            del self._tail[: len(self._tail) - _TAIL_KEPT]

    def _read_tail(self) -> None:
        """The last usage object in an oversized event's tail, if it is whole there."""
        found = last_usage(self._tail)
        if found is not None:
            self.usage = found

    def _dispatch(self, lines: list[bytes]) -> None:
        # "usage", Gemini's "usageMetadata"; "error", "error_type" (an error event)
        if not any(b'"usage' in line or b'"error' in line for line in lines):
            return
        # the spec joins an event's data lines into one payload; some upstreams put one JSON
        # object on each data line instead: read those one by one when the whole is no JSON
        for obj in data_objects(lines):
            self._note(obj)

    def _note(self, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        if self.error is None:
            self.error = error_event(obj)
        holder = obj.get("message") if kind == "message_start" else obj.get("response")
        if not isinstance(holder, dict):  # a chat chunk, a message_delta: usage at the top
            holder = obj
        if self.answer_id is None and "id" in holder:
            self.answer_id = holder["id"]
        for name in _DIAGNOSTICS:
            if holder.get(name) is not None or (name in holder and self.diagnostics is None):
                self.diagnostics = {name: holder[name]}
        usage = holder.get("usage")
        if usage is None:
            usage = holder.get("usageMetadata")  # Gemini's, in each chunk (the last is final)
        if not isinstance(usage, dict):
            return
        if kind == "message_delta" and self.usage is not None:
            # Anthropic: the delta's counts (output_tokens, and lately the input ones, as
            # totals) complete message_start's
            self.usage = {**self.usage, **usage}
        else:
            self.usage = usage


def _named_error(event: bytes) -> bool:
    """Whether an event (its lines ending in LF) is named as an error."""
    return (b"error" in event or b"failed" in event) and _ERROR_NAME.search(event) is not None


def _event_name(event: bytes) -> bytes:
    """An event's name: its last ``event:`` line's."""
    names = [line[6:].strip()[:64] for line in event.split(b"\n") if line.startswith(b"event:")]
    return names[-1] if names else b""
