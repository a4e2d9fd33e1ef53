"""Secrets never reach the session state: what the rules copied from a request (a goal holding an
API key, a command with ``postgres://user:password@…``, a failing test printing a password) is
redacted before the state is cached or stored.

Redaction happens before the in-memory cache, not only on the way to the database, so the next
request sees the same state whether it was served from memory or read back after a restart.
Only what changed is walked: a rule that leaves a value alone hands back the very same object,
and an object already redacted by an earlier request is skipped by identity."""

from __future__ import annotations

from typing import Any

from rules.base import SessionState
from rules.redact import REDACTED, redact_text
from rules.redact import is_secret_value as secret  # a name's, or a shaped name's value


def redact_state(
    new: SessionState, old: SessionState, own: frozenset[str] = frozenset()
) -> SessionState:
    """``new`` with every string the rules added since ``old`` redacted (same object if none).
    ``own``: namespaces holding only values the proxy computed, never client text (the previous
    request's message hashes: hundreds of new strings a request, walked for nothing)."""
    if new is old:
        return new
    changed: dict[str, Any] = {}
    for namespace, value in new.data.items():
        before = old.data.get(namespace)
        if value is before or namespace in own:
            continue
        cleaned = redact_changed(value, before)
        if cleaned is not value:
            changed[namespace] = cleaned
    if not changed:
        return new
    return SessionState({**new.data, **changed})


def redact_changed(value: Any, before: Any) -> Any:
    """A redacted copy of ``value``, sharing (not walking) every sub-value that is the very same
    object as its counterpart in ``before``. Returns ``value`` itself when nothing changed."""
    if value is before:
        return value
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        prior = before if isinstance(before, dict) else {}
        out: dict[Any, Any] | None = None
        for i, (k, v) in enumerate(value.items()):
            key = redact_text(k) if isinstance(k, str) and k not in prior else k
            if v is None or isinstance(v, (int, float)):  # a number or a flag: no text in it
                new_v: Any = v
            elif isinstance(k, str) and v and not isinstance(v, (dict, list)) and secret(k, v):
                new_v = REDACTED
            else:
                new_v = redact_changed(v, prior.get(k))
            if out is None and (key is not k or new_v is not v):
                out = dict(list(value.items())[:i])
            if out is not None:
                out[key] = new_v
        return value if out is None else out
    if isinstance(value, list):
        # entries carried over from ``before`` (the same objects) were redacted already
        kept = {id(x) for x in before} if isinstance(before, list) else set()
        items = [x if id(x) in kept else redact_changed(x, None) for x in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value
