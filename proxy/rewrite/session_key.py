"""Which session a request belongs to: X-Session-Id > the agent's own session header (Claude
Code's ``x-claude-code-session-id``, Codex's ``session-id`` / ``thread-id``) >
metadata.session_id > the ``session_id`` inside Claude Code's ``metadata.user_id`` JSON >
``prompt_cache_key`` > user > a hash of the first system and first user message (stable across
the turns of one conversation).

A session id is stored, logged and shown; one that looks like a secret (a client that puts its
API key in ``user``) is replaced by a hash of itself, so it still names one session."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from rules.messages import role, text_of
from rules.redact import redact_text

# Agents' own session headers, in order of preference.
_SESSION_HEADERS = ("x-session-id", "x-claude-code-session-id", "session-id", "thread-id")
_MAX_USER_ID_CHARS = 4096  # a metadata.user_id longer than this is not parsed for a session


def session_key(
    headers: Mapping[str, str], body: Mapping[str, Any], messages: list[Any] | None = None
) -> str:
    """``messages``: the conversation in the chat view, when the body is another protocol's."""
    named = _named(headers, body)
    if named is not None:
        return _unsecret(named)
    if messages is None:
        messages = body.get("messages") or []
    return _unsecret("conv:" + conversation_hash(messages))


def named_session(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """``session_key`` where the headers or the body name the session; None where only the
    conversation's hash does (its messages are then needed)."""
    named = _named(headers, body)
    return None if named is None else _unsecret(named)


def _unsecret(key: str) -> str:
    if redact_text(key) == key:
        return key
    return "hashed:" + hashlib.blake2b(key.encode(), digest_size=12).hexdigest()


def header_session(headers: Mapping[str, str]) -> str | None:
    """The session a request's headers name (X-Session-Id, then the agents' own), if any."""
    for name in _SESSION_HEADERS:
        value = headers.get(name)
        if value and value.strip():
            return value.strip()[:200]
    return None


def _named(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    named = header_session(headers)
    if named is not None:
        return named
    metadata = body.get("metadata")
    meta_id = metadata.get("session_id") if isinstance(metadata, dict) else None
    if isinstance(meta_id, str) and meta_id.strip():
        return meta_id.strip()[:200]
    inner = _user_id_session(metadata.get("user_id") if isinstance(metadata, dict) else None)
    if inner:
        return inner
    cache_key = body.get("prompt_cache_key")
    if isinstance(cache_key, str) and cache_key.strip():
        return cache_key.strip()[:200]
    user = body.get("user")
    if isinstance(user, str) and user.strip():
        return "user:" + user.strip()[:200]
    return None


def _user_id_session(user_id: Any) -> str | None:
    """Claude Code's ``metadata.user_id`` is a JSON string holding ``session_id``."""
    if not isinstance(user_id, str) or not user_id.startswith("{"):
        return None
    if len(user_id) > _MAX_USER_ID_CHARS:
        return None
    try:
        value = orjson.loads(user_id)
    except orjson.JSONDecodeError:
        return None
    sid = value.get("session_id") if isinstance(value, dict) else None
    return sid.strip()[:200] if isinstance(sid, str) and sid.strip() else None


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
