"""A captured request body kept to ``CAPTURE_MAX_BYTES`` of text, its JSON shape whole.

With ``store.capture_payloads`` the request and forwarded bodies are redacted and stored: a
30 MB body of text dense in secrets' names (``password``, ~3 µs a character) held a worker for
three minutes, two tenants took both workers, and another's 300 KB request timed out at 150 s;
each regex over one 20 MB string held the interpreter 0.7 s; the log grew by the bodies whole.
Past the bound, strings are cut (the first ones kept, a note of what was left), so the page's
diff still reads the messages and their roles."""

from __future__ import annotations

from typing import Any

from rules.redact import redacted_prefix

CAPTURE_MAX_BYTES = 2 << 20  # of a captured body's text (and of an answer: ``log_fields``)


def note(left: int) -> str:
    return f"[ctxproxy: {left} more characters not captured]"


# A string this short (a role, a type, an id) is kept whole past the bound, up to a quarter
# of it more: the messages still read as messages
SHORT = 64


# Characters before a cut read again, redacted with what follows the cut (from a blank, if
# one is near: a secret holds none, so none is split where the redacted part starts)
CUT_TAIL = 256


def redacted_cut(value: str, room: int) -> str:
    """``value``'s first ``room`` characters, their end redacted as the whole reads it: cut
    first and redacted after, a secret the cut split lost what names it (``postgres://admin:
    S3c`` is no URL's password), and its beginning was kept."""
    start = max(0, room - CUT_TAIL)
    low = max(0, start - CUT_TAIL)
    blank = max(value.rfind(" ", low, start), value.rfind("\n", low, start))
    start = blank + 1 if blank >= 0 else start
    return value[:start] + redacted_prefix(value[start:], room - start)


def within(body: Any, size: int, limit: int = CAPTURE_MAX_BYTES) -> Any:
    """``body`` (of ``size`` bytes as JSON) itself when it is within ``limit``; else a copy whose
    strings hold ``limit`` characters in all, in document order, each cut one noting the rest
    (and ``SHORT`` ones whole, for a quarter of ``limit`` more)."""
    if size <= limit:
        return body
    budget = [limit, limit // 4]  # characters of any string left; of short ones past that

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            room = budget[0]
            if len(value) <= room:
                budget[0] = room - len(value)
                return value
            if len(value) <= min(SHORT, budget[1]):
                budget[1] -= len(value)
                return value
            budget[0] = 0
            return redacted_cut(value, room) + note(len(value) - room)
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item) for item in value]
        return value

    return walk(body)
