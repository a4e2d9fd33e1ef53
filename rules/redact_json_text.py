"""A text that is JSON, read decoded, for ``rules.redact``: a tool call's arguments are a JSON
text (``{"path": "app.yml", "content": "db:\\n  password: |\\n    …"}``), whose escaped line
breaks and quotes hide from the text's patterns the forms they read across lines or between
quotes (a YAML block, a table's rows, a here-string, CJK prose). Its strings are redacted
decoded, and each one that changed is put back encoded in its place; the rest of the text keeps
its bytes (the whole is encoded again only where a string cannot be found as it was written)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

# Only a text with an escape can hide a secret from the patterns this way; and one so long is
# a tool's output, not a call's arguments (the patterns read it whole)
_MAX_CHARS = 1_000_000


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
    except (ValueError, RecursionError):  # no JSON, or nested past what can be walked
        return text
    if out == value:
        return text
    found = dict(_changed(value, out))
    changed = {old: new for old, new in found.items() if new is not None}
    if len(changed) < len(found):
        return _dumped(text, out)
    for old, new in sorted(changed.items(), key=lambda kv: -len(kv[0])):
        written = next((w for w in _encodings(old) if w in text), None)
        if written is None:
            return _dumped(text, out)
        text = text.replace(written, _encode(new, ascii_only="\\u" in written))
    return text


def _strings(value: Any, redact_text: Callable[[str], str]) -> Any:
    """``value`` with its strings, and its objects' keys, redacted as texts."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {redact_text(k): _strings(v, redact_text) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings(v, redact_text) for v in value]
    return value


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
