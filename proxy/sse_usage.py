"""Reads ``usage`` out of a relayed SSE stream without touching the bytes sent to the client."""

from __future__ import annotations

from typing import Any

import orjson


class UsageTap:
    """Feed it the raw chunks; afterwards ``usage`` holds the last non-null usage seen."""

    def __init__(self) -> None:
        self._pending = b""
        self.usage: dict[str, Any] | None = None
        self.events = 0

    def feed(self, chunk: bytes) -> None:
        data = self._pending + chunk
        *events, self._pending = data.split(b"\n\n")
        for event in events:
            self.events += 1
            if b'"usage"' in event:
                self._read(event)

    def _read(self, event: bytes) -> None:
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    continue
                try:
                    obj = orjson.loads(payload)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(obj, dict) and isinstance(obj.get("usage"), dict):
                    self.usage = obj["usage"]
