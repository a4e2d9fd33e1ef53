"""Telling that a relayed stream carried the answer's last event: Responses'
``response.completed`` (or ``.incomplete``, ``.failed``), Anthropic's ``message_stop``, Chat
Completions' ``data: [DONE]``. A client may close the connection as soon as it has that event
(Codex stops reading at ``response.completed``), before the upstream ends its stream: that is a
whole answer, not a client that went away (``client_disconnected`` stays 0).

Nothing is searched while the stream flows: the relay hands each chunk it sent to ``feed``, which
keeps references to the last ``WINDOW`` bytes of them; only a relay that stopped before the
upstream's end asks ``seen()``, which searches those bytes once. Nothing legitimate follows the
last event, so it lies in the window unless that one event is larger than the window."""

from __future__ import annotations

import re
from collections import deque

WINDOW = 256 * 1024  # bytes of the latest chunks kept (a response.completed echoes the response)

# The event's type in its data (a quote inside a JSON string is escaped, so these are keys), or
# its ``event:`` line, or the chat stream's terminator line.
_LAST = re.compile(
    rb'"type": ?"(?:response\.(?:completed|incomplete|failed)|message_stop)"'
    rb"|(?:^|\n)(?:event: ?(?:response\.(?:completed|incomplete|failed)|message_stop)\r?\n"
    rb"|data: ?\[DONE\])"
)


class AnswerEnd:
    """Fed each chunk once it was sent to the client; ``seen()``: whether the answer's last event
    was among them."""

    __slots__ = ("_recent", "_size")

    def __init__(self) -> None:
        self._recent: deque[bytes] = deque()
        self._size = 0

    def feed(self, chunk: bytes) -> None:
        recent = self._recent
        recent.append(chunk)
        self._size += len(chunk)
        while self._size > WINDOW and len(recent) > 1:
            self._size -= len(recent.popleft())

    def seen(self) -> bool:
        return _LAST.search(b"".join(self._recent)) is not None
