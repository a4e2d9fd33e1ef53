"""Reads ``usage`` out of a relayed SSE stream without touching the bytes sent to the client.

Lines end in LF, CRLF or CR (the SSE spec allows all three); a blank line ends an event. Each
chunk is scanned once, so a stream costs time linear in its size, and what is held between
chunks (an unfinished line, the current event's data) is capped at ``MAX_PENDING`` bytes: an
event larger than that is skipped, it is never a usage event in practice."""

from __future__ import annotations

import re
from typing import Any

import orjson

MAX_PENDING = 64 * 1024
_LINE_END = re.compile(rb"\r\n|\r|\n")


class UsageTap:
    """Feed it the raw chunks; afterwards ``usage`` holds the last non-null usage seen."""

    def __init__(self) -> None:
        self._line = bytearray()  # the unfinished last line
        self._data: list[bytes] = []  # the current event's data lines
        self._data_size = 0
        self._oversized = False  # the current event went over MAX_PENDING: skip it
        self._skip_lf = False  # the previous chunk ended in CR: a leading LF belongs to it
        self.usage: dict[str, Any] | None = None
        self.events = 0

    @property
    def pending_bytes(self) -> int:
        return len(self._line) + self._data_size

    def feed(self, chunk: bytes) -> None:
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._skip_lf = chunk[-1:] == b"\r"
        *complete, rest = _LINE_END.split(chunk)
        for i, line in enumerate(complete):
            if i == 0 and self._line:
                line = bytes(self._line) + line
                self._line.clear()
            self._take(line)
        if len(self._line) + len(rest) + self._data_size > MAX_PENDING:
            self._oversized = True
            self._line.clear()
        else:
            self._line += rest

    def _take(self, line: bytes) -> None:
        if not line:  # a blank line ends the event
            if self._data or self._oversized:
                self.events += 1
            if self._data and not self._oversized:
                self._dispatch(self._data)
            self._data.clear()
            self._data_size = 0
            self._oversized = False
            return
        if self._oversized or not line.startswith(b"data:"):
            return
        if self._data_size + len(line) > MAX_PENDING:
            self._oversized = True
            self._data.clear()
            self._data_size = 0
            return
        self._data.append(line[5:])
        self._data_size += len(line)

    def _dispatch(self, lines: list[bytes]) -> None:
        if not any(b'"usage"' in line for line in lines):
            return
        # The spec joins an event's data lines into one payload; some upstreams put one JSON
        # object on each data line instead: read those one by one when the whole is no JSON.
        candidates = [b"\n".join(lines)] if len(lines) == 1 else [b"\n".join(lines), *lines]
        for payload in candidates:
            try:
                obj = orjson.loads(payload)
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("usage"), dict):
                self.usage = obj["usage"]
