"""An event stream's error events, found as the stream passes (``ErrorRedactor.stream``): each
chunk is searched for the bytes ``error`` and, only where they occur, that event is held back
until its head tells whether it is an error event (almost always within the same chunk), then
relayed as it came unless it is one, which is redacted."""

from __future__ import annotations

from typing import Protocol

from proxy.upstream.error_events import HEAD_BYTES, is_error_event, is_error_head


class EventRedactor(Protocol):
    """What redacts an error event (``ErrorRedactor``)."""

    def event(self, event: bytes, whole: bool) -> bytes: ...


_MARK = b"error"
_KEEP = len(_MARK) - 1  # bytes kept of the last relayed chunk: a mark may straddle two chunks
_HEAD = HEAD_BYTES  # bytes of an event's start that tell whether it is an error event
_MAX_HELD = 1 << 20  # an error event longer than this is redacted as text in pieces
_ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")  # a blank line ends an event (LF, CRLF or CR)


def last_event_end(data: bytes, limit: int, ends: tuple[bytes, ...] = _ENDS) -> int:
    """Just after the last blank line inside ``data[:limit]``, or -1. ``ends``: the ways of
    ending one, the stream's own first; each next one is looked for only after the best found
    so far, so a way the stream does not use is not searched for through all of it, once for
    every event."""
    best = -1
    for end in ends:
        i = data.rfind(end, 0 if best < 0 else max(0, best - len(end) + 1), limit)
        if i >= 0 and i + len(end) > best:
            best = i + len(end)
    return best


def _first_end(data: bytes, start: int, ends: tuple[bytes, ...] = _ENDS) -> int:
    """Just after the first blank line ending in ``data[start:]``, or -1 (``ends`` as for
    ``last_event_end``: each next one looked for only before the best found so far)."""
    best = -1
    for end in ends:
        i = data.find(end, start) if best < 0 else data.find(end, start, best - 1)
        if i >= 0:
            best = i + len(end)
    return best


def _ends_first(found: bytes) -> tuple[bytes, ...]:
    """The ways of ending an event, the one ``found`` ends with first."""
    own = next((e for e in _ENDS if found.endswith(e)), _ENDS[0])
    return (own, *(e for e in _ENDS if e != own))


class EventScanner:
    """Relays an event stream's bytes, holding back only an event whose bytes hold ``error``
    until its head says what it is, and redacting it if it is an error event."""

    def __init__(self, redactor: EventRedactor) -> None:
        self.redactor = redactor
        self.sent = b""  # the open event's first bytes, relayed already (at most _HEAD)
        self.tail = b""  # the last bytes relayed (a mark or a blank line may straddle chunks)
        self.held = b""  # the open event's bytes held back
        self.error = False  # the held event is an error event
        self.cut = False  # part of it was redacted and relayed already (it is that long)
        self.searched = 0  # how far the held event was searched for its end
        self.ends: tuple[bytes, ...] = _ENDS  # the ways of ending an event, its own first

    def feed(self, chunk: bytes) -> bytes:
        if not (self.held or self.error or _MARK in chunk or self._straddles(chunk)):
            self._note(chunk)  # the common case: relayed as it came
            return chunk
        out: list[bytes] = []
        pos = 0  # where the chunk's bytes not yet relayed or held start (an event's start)
        while pos < len(chunk):
            if self.held or self.error:
                self.held += chunk[pos:] if pos else chunk
                chunk, pos = self._settle(out), 0
                continue
            # a mark straddling the two chunks first: a later one would let this chunk's start by
            at = 0 if not pos and self._straddles(chunk) else chunk.find(_MARK, pos)
            if at < 0:
                self._relay(chunk[pos:] if pos else chunk, out)
                break
            # at ``pos`` an event starts (one ended there, or the stream starts): the one holding
            # the mark starts there or later
            if pos or self._between_events():
                start = max(pos, last_event_end(chunk, at, self.ends))
            else:
                start = self._event_start(chunk, at)
            if start > pos:
                self._relay(chunk[pos:start], out)
            if start >= 0 and (end := self._relayed_whole(chunk, start, out)) >= 0:
                pos = end  # no error event: decided within the chunk, nothing held or copied
                continue
            self.held, self.searched = chunk[max(start, 0) :], 0
            chunk, pos = self._settle(out), 0
        return b"".join(out)

    def _relayed_whole(self, chunk: bytes, start: int, out: list[bytes]) -> int:
        """The event starting at ``chunk[start]`` relayed when it ends within the chunk and its
        head says it is no error event: where it ends; else -1 (it is held)."""
        end = _first_end(chunk, start, self.ends)
        if end < 0:
            return -1
        verdict = is_error_head(chunk[start : start + _HEAD])
        if verdict or (verdict is None and is_error_event(chunk[start:end])):
            return -1
        if not chunk.startswith(self.ends[0], end - len(self.ends[0])):
            self.ends = _ends_first(chunk[max(start, end - 4) : end])
        self._relay(chunk[start:end], out)
        return end

    def finish(self) -> bytes:
        """What is held when the stream ends (an unfinished event)."""
        out: list[bytes] = []
        if self.held:
            if self.error or self._is_error(len(self.held)):
                out.append(self.redactor.event(self.held, whole=not (self.sent or self.cut)))
            else:
                out.append(self.held)
            self.held = b""
        return b"".join(out)

    def _head(self) -> bytes:
        return (self.sent + self.held[:_HEAD])[:_HEAD]

    def _is_error(self, end: int) -> bool:
        """Whether the held event, to ``held[end]`` (its end, or the stream's), is an error
        event, read whole; one whose start was relayed past the head kept of it (``sent``) cannot
        be, and is taken for one: its held part is redacted as text."""
        if len(self.sent) >= _HEAD:
            return True
        return is_error_event(self.sent + self.held[:end])

    def _event_start(self, data: bytes, limit: int) -> int:
        """Where the event holding ``data[limit]`` starts in ``data``; -1: before it."""
        end = last_event_end(data, limit, self.ends)
        if end < 0 and self.tail:  # a blank line across the two chunks
            joint = self.tail + data[: min(limit, _KEEP)]
            found = last_event_end(joint, len(joint))
            if found > len(self.tail):
                end = found - len(self.tail)
        return end

    def _between_events(self) -> bool:
        """Whether the bytes relayed so far end an event (or there are none)."""
        return not self.tail or any(self.tail.endswith(end) for end in self.ends)

    def _straddles(self, chunk: bytes) -> bool:
        """Whether a mark begins in the last chunk and ends in ``chunk``."""
        return bool(self.tail) and _MARK in self.tail + chunk[:_KEEP]

    def _relay(self, data: bytes, out: list[bytes]) -> None:
        out.append(data)
        self._note(data)

    def _note(self, data: bytes) -> None:
        """Keep what the next chunks need of ``data``, relayed: its open event's head, its tail."""
        if data.endswith(b"\n\n"):  # a chunk per event (most upstreams)
            self.sent = b""
        else:
            end = self._event_start(data, len(data))
            if end >= 0:
                self.sent = data[end : end + _HEAD]
            elif len(self.sent) < _HEAD:
                self.sent += data[: _HEAD - len(self.sent)]
        self.tail = data[-_KEEP:] if len(data) >= _KEEP else (self.tail + data)[-_KEEP:]

    def _settle(self, out: list[bytes]) -> bytes:
        """Decide on the held event as far as its bytes allow; returns the bytes after it (the
        next events), to be scanned again."""
        if not self.error:
            verdict = is_error_head(self._head())
            end = _first_end(self.held, 0, self.ends)
            if verdict is None and end < 0 and len(self.held) <= _MAX_HELD:
                return b""  # its head, or its end, has not come yet
            if verdict is None:  # read whole (one past _MAX_HELD unended: taken for an error)
                verdict = end < 0 or self._is_error(end)
            if not verdict:  # relayed as it came
                data, rest = (self.held, b"") if end < 0 else (self.held[:end], self.held[end:])
                self.held = b""
                self._relay(data, out)
                return rest
            self.error = True
        end = _first_end(self.held, max(0, self.searched - 3), self.ends)
        if end < 0:
            self.searched = len(self.held)
            if len(self.held) > _MAX_HELD:
                out.append(self.redactor.event(self.held, whole=False))
                self.held, self.searched, self.cut = b"", 0, True
            return b""
        event, rest = self.held[:end], self.held[end:]
        out.append(self.redactor.event(event, whole=not (self.sent or self.cut)))
        self.held, self.sent, self.tail = b"", b"", event[-_KEEP:]
        self.error = self.cut = False
        return rest
