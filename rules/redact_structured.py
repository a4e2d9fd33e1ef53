"""Secrets a JSON value holds by its structure rather than by a field's own name, for
``rules.redact.redact``:

- a name given as another field's value (``{"name": "DB_PASSWORD", "value": …}`` in a
  Kubernetes env list or a HAR's headers, CloudFormation's ``ParameterKey``/``ParameterValue``):
  the value field goes, the name stays (``{"key": "API_KEY", …}`` names the secret, it is none);
  so does the value beside a ``keyName`` (``az storage account keys list``), which names a key;
- a command's words as a list (``["mysql", "-u", "root", "-pS3cret"]``, ``["curl", "-u",
  "admin:S3cret"]``): read as the command line they make, as ``redact_text`` reads one.

The texts' net reads both forms in a string; these are the same forms as JSON."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rules.redact_names import is_secret_name

# (the field naming the secret, the field holding its value)
_PAIRS = (
    ("name", "value"), ("key", "value"), ("Name", "Value"), ("Key", "Value"),
    ("ParameterKey", "ParameterValue"), ("ParameterName", "ParameterValue"),
    ("parameterKey", "parameterValue"), ("parameterName", "parameterValue"),
)  # fmt: skip
_VALUE_FIELDS = ("value", "Value", "ParameterValue", "parameterValue")
# Fields that say their object's value is a key whatever its name (a cloud's listing of an
# account's keys: Azure's ``{"keyName": "key1", "permissions": "FULL", "value": …}``)
_KEY_NAME_PAIRS = (("keyName", "value"), ("KeyName", "Value"))

# A list read as a command: at most this many words, and this many characters in all.
MAX_WORDS = 64
MAX_CHARS = 4096


def named_pair(d: dict[Any, Any]) -> tuple[str, str] | None:
    """(name field, value field) when ``d`` gives a secret's name in one field and its value, a
    text, in the other; None otherwise (most dicts: four lookups)."""
    if not any(f in d for f in _VALUE_FIELDS):
        return None
    for name_field, value_field in _KEY_NAME_PAIRS:
        named, held = d.get(name_field), d.get(value_field)
        if isinstance(held, str) and held and isinstance(named, str):
            return name_field, value_field
    for name_field, value_field in _PAIRS:
        named, held = d.get(name_field), d.get(value_field)
        if isinstance(held, str) and held and isinstance(named, str) and is_secret_name(named):
            return name_field, value_field
    return None


def command_words(words: list[Any], redact_text: Callable[[str], str]) -> list[str] | None:
    """``words`` redacted as the command line they make, when they look like one (strings only,
    one of them a flag, no blank inside a word) and the line holds a secret; None otherwise."""
    if not 2 <= len(words) <= MAX_WORDS:
        return None
    total, flagged = 0, False
    for w in words:
        if w.__class__ is not str or not w or " " in w:
            return None
        total += len(w) + 1
        flagged = flagged or w[0] == "-"
    if not flagged or total > MAX_CHARS:
        return None
    line = " ".join(words)
    redacted = redact_text(line)
    if redacted == line:
        return None
    out = redacted.split(" ")
    # a redaction that joined or split words: each word as its own text, as before
    return out if len(out) == len(words) else None
