"""A log row's JSON column (its report, its cache line) redacted and encoded, each top-level
member's redaction remembered by the member's JSON text.

The writer encodes every row it stores; redacting a 20-message request's report walked ~80
nodes (~30 µs of the ~40 µs the row took), on the event loop, and most of it repeats from
request to request of a session (its sections, its schedule, its workspace, its goal): only the
timings and counts change. So each member is encoded first (~0.2 µs), and that text is the key
of its redacted encoding. A miss redacts the member as its JSON reads back (``orjson.loads``),
so what is remembered depends on the text alone: a tuple or a dataclass (which ``orjson``
writes as a list and an object) is redacted as the list or object it is written as, never
passed through. The result is the text ``orjson.dumps(redact(value))`` writes for JSON values."""

from __future__ import annotations

from typing import Any

import orjson

from rules.redact import REDACTED, redact, secret_field
from rules.text_cache import text_cache

# Leaves kept as they are (``rules.redact``: a number, a flag or null is never a secret).
_PLAIN = frozenset({int, float, bool, type(None)})
_REDACTED_JSON = orjson.dumps(REDACTED).decode()


def _redacted_text(text: str) -> str:
    """A member's JSON text, redacted."""
    return orjson.dumps(redact(orjson.loads(text))).decode()


# Members repeat across a session's requests and the sessions of one agent; a member over
# 16,000 characters (a long pruning list) is redacted every time, not held.
_remembered = text_cache(max_chars=4_000_000, max_text_chars=16_000, max_entries=16_384)(
    _redacted_text
)


def redacted_json(value: dict[str, Any]) -> str:
    """``orjson.dumps(redact(value)).decode()`` for a dict of JSON values; raises as
    ``orjson.dumps`` does (TypeError) for what JSON cannot hold."""
    parts = []
    for key, member in value.items():
        if key.__class__ is not str:  # orjson refuses it: the row is lost, as before
            raise TypeError(f"a JSON column's key must be a string, not {type(key).__name__}")
        if member.__class__ in _PLAIN:
            part = orjson.dumps(member).decode()
        elif secret_field(key, member, value):
            part = _REDACTED_JSON
        else:
            part = _remembered(orjson.dumps(member).decode())
        parts.append(f"{orjson.dumps(key).decode()}:{part}")
    return "{" + ",".join(parts) + "}"
