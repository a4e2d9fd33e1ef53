"""Which session a request belongs to: X-Session-Id > metadata.session_id > user > a hash of the
first system and first user message (stable across the turns of one conversation).

A session id is stored, logged and shown; one that looks like a secret (a client that puts its
API key in ``user``) is replaced by a hash of itself, so it still names one session."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from rules.messages import role, text_of
from rules.redact import redact_text


def session_key(headers: Mapping[str, str], body: Mapping[str, Any]) -> str:
    return _unsecret(_session_key(headers, body))


def _unsecret(key: str) -> str:
    if redact_text(key) == key:
        return key
    return "hashed:" + hashlib.blake2b(key.encode(), digest_size=12).hexdigest()


def _session_key(headers: Mapping[str, str], body: Mapping[str, Any]) -> str:
    explicit = headers.get("x-session-id")
    if explicit:
        return explicit.strip()[:200]
    metadata = body.get("metadata")
    meta_id = metadata.get("session_id") if isinstance(metadata, dict) else None
    if isinstance(meta_id, str) and meta_id.strip():
        return meta_id.strip()[:200]
    user = body.get("user")
    if isinstance(user, str) and user.strip():
        return "user:" + user.strip()[:200]
    return "conv:" + conversation_hash(body.get("messages") or [])


def conversation_hash(messages: list[Any]) -> str:
    first: dict[str, str] = {}
    for m in messages:
        if isinstance(m, dict) and role(m) in ("system", "user") and role(m) not in first:
            first[role(m)] = text_of(m.get("content"))
        if len(first) == 2:
            break
    seed = f"{first.get('system', '')}\x00{first.get('user', '')}".encode()
    return hashlib.blake2b(seed, digest_size=12).hexdigest()


def parent_session_key(headers: Mapping[str, str]) -> str | None:
    parent = headers.get("x-parent-session-id")
    return _unsecret(parent.strip()[:200]) if parent and parent.strip() else None
