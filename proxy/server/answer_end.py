"""Telling that a relayed stream carried the answer's last event: Responses'
``response.completed`` (or ``.incomplete``, ``.failed``), Anthropic's ``message_stop``, Chat
Completions' ``data: [DONE]`` (or a chunk with its ``finish_reason``, which some compatible
servers end on), Gemini's ``finishReason``. A client may close the connection as soon as it has
that event (Codex stops reading at ``response.completed``), before the upstream ends its stream:
that is a whole answer, not a client that went away (``client_disconnected`` stays 0). An
upstream that ends its stream without it broke off (``stream_relay``).

Nothing is searched while the stream flows: the relay hands each chunk it sent to ``feed``, which
keeps references to the last ``WINDOW`` bytes of them; ``seen()`` searches those bytes once. A
chunk leaving the window is searched as it leaves (only a stream longer than the window pays), so
a last event larger than the window is found by its start."""

from __future__ import annotations

import re
from collections import deque

WINDOW = 256 * 1024  # bytes of the latest chunks kept (a response.completed echoes the response)

# The event's type in its data (a quote inside a JSON string is escaped, so these are keys), or
# its ``event:`` line, or the chat stream's terminator line. In three patterns each led by a
# literal the engine scans for (one alternation led by ``(?:^|\n)`` was tried at every byte:
# 18 ms a MiB, 0.15 s for a Gemini array element of 8 MiB; these 0.3-7 ms a MiB).
_IN_DATA = re.compile(
    rb'"(?:type": ?"(?:response\.(?:completed|incomplete|failed)|message_stop)"'
    rb'|(?:finish_reason|finishReason|stop_reason)": ?")'
)
_LINE = (
    rb"(?:event: ?(?:response\.(?:completed|incomplete|failed)|message_stop)\r?\n"
    rb"|data: ?\[DONE\])"
)
_AFTER_NEWLINE = re.compile(rb"\n" + _LINE)
_AT_START = re.compile(_LINE)


def _has_last(data: bytes) -> bool:
    """Whether ``data`` holds the answer's last event (at a line's start, for the lines)."""
    return (
        _IN_DATA.search(data) is not None
        or _AFTER_NEWLINE.search(data) is not None
        or _AT_START.match(data) is not None
    )


class AnswerEnd:
    """Fed each chunk once it was sent to the client; ``seen()``: whether the answer's last event
    was among them."""

    __slots__ = ("_left_with_it", "_recent", "_size")

    def __init__(self) -> None:
        self._recent: deque[bytes] = deque()
        self._size = 0
        self._left_with_it = False  # a chunk that left the window held the last event

    def _leaves(self, chunk: bytes) -> None:
        self._size -= len(chunk)
        if not self._left_with_it and _has_last(chunk):
            self._left_with_it = True

    def feed(self, chunk: bytes) -> None:
        recent = self._recent
        recent.append(chunk)
        self._size += len(chunk)
        while self._size > WINDOW and len(recent) > 1:
            self._leaves(recent.popleft())

    def seen(self) -> bool:
        return self._left_with_it or _has_last(b"".join(self._recent))
