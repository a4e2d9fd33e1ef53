"""A text that is JSON, read decoded, for ``rules.redact``: a tool call's arguments are a JSON
text (``{"path": "app.yml", "content": "db:\\n  password: |\\n    …"}``), whose escaped line
breaks and quotes hide from the text's patterns the forms they read across lines or between
quotes (a YAML block, a table's rows, a here-string, CJK prose). Its strings are redacted
decoded, and each one that changed is put back encoded in its place; the rest of the text keeps
its bytes (the whole is encoded again only where a string cannot be found as it was written)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

# Only a text with an escape can hide a secret from the patterns this way; and one so long is
# a tool's output, not a call's arguments (the patterns read it whole)
_MAX_CHARS = 1_000_000
# Strings read decoded at most (each a redaction of its own: ~20 µs for a short one); a text
# holding more (a tool's output, not a call's arguments) is left to the patterns
_MAX_STRINGS = 2_000
# What a JSON text writes escaped: a line break, a quote, a backslash, a control character, and
# (as an encoder that writes ASCII only does) any other than ASCII's printable ones
_ESCAPED = re.compile(r'[^\x20\x21\x23-\x5b\x5d-\x7e]')
# Strings put back in their places at most; more: encoded whole
_MAX_PLACED = 32
# A string as a JSON text writes it, escapes read whole: outside strings a JSON text has no
# quote, so these are its strings (linear: possessive)
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.S)


def redact_json_text(text: str, redact_text: Callable[[str], str]) -> str:
    """``text`` with the secrets its decoded strings hold replaced (each read as a text, by
    ``redact_text``: a field's name is judged as the text judges it), when it is a JSON object or
    array holding an escape; else ``text``."""
    if len(text) > _MAX_CHARS or "\\" not in text:
        return text
    head, tail = text[:1], text[-1:]
    if not ((head == "{" and tail == "}") or (head == "[" and tail == "]")):
        return text
    try:
        value = json.loads(text)
        out = _strings(value, redact_text)
    except (ValueError, RecursionError, _TooMany):  # no JSON, or more than is read so
        return text
    if out == value:
        return text
    found = dict(_changed(value, out))
    changed = {old: new for old, new in found.items() if new is not None}
    if len(changed) < len(found) or len(changed) > _MAX_PLACED:
        return _dumped(text, out)
    # each string as it may be written, and what it is written as now
    placed = {w: _encode(new, ascii_only="\\u" in w) for old, new in changed.items()
              for w in _encodings(old)}  # fmt: skip
    seen: set[str] = set()

    def put(m: re.Match[str]) -> str:
        new = placed.get(m[0])
        if new is None:
            return m[0]
        seen.add(m[0])
        return new

    # the text's strings, each whole (a string's written form may also end another one)
    text_out = _STRING.sub(put, text)
    if any(not seen.intersection(_encodings(old)) for old in changed):
        return _dumped(text, out)  # one not written as it encodes
    return text_out


def _strings(value: Any, redact_text: Callable[[str], str]) -> Any:
    """``value`` with its strings, and its objects' keys, redacted as texts: those written with
    an escape (the others the patterns read as they are, in the text), ``_MAX_STRINGS`` at most
    (more: ``_TooMany``)."""
    left = [_MAX_STRINGS]

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            if not _ESCAPED.search(v):
                return v
            left[0] -= 1
            if left[0] < 0:
                raise _TooMany
            return redact_text(v)
        if isinstance(v, dict):
            return {walk(k): walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value)


class _TooMany(Exception):
    """More strings than a text's redaction reads decoded: the text is left to the patterns."""


def _changed(old: Any, new: Any) -> Iterator[tuple[str, str | None]]:
    """The strings (values and keys) of ``old`` that redaction changed, with what they became;
    None for what is no string, or was one and became another value."""
    if isinstance(old, str):
        if old != new:
            yield old, new if isinstance(new, str) else None
    elif isinstance(old, dict) and isinstance(new, dict) and len(old) == len(new):
        for (k, v), (nk, nv) in zip(old.items(), new.items(), strict=True):
            if k != nk:
                yield k, nk
            yield from _changed(v, nv)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for v, nv in zip(old, new, strict=True):
            yield from _changed(v, nv)
    elif old != new:  # a value replaced whole (a secret field's object): not a string
        yield "", None


def _encodings(value: str) -> tuple[str, ...]:
    return (_encode(value, ascii_only=False), _encode(value, ascii_only=True))


def _encode(value: str, *, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)


def _dumped(text: str, out: Any) -> str:
    """``out`` encoded whole, laid out as ``text`` was (indented when it had line breaks)."""
    return json.dumps(out, ensure_ascii=False, indent=2 if "\n" in text else None)
