"""Which session a request belongs to: X-Session-Id > the agent's own session header (Claude
Code's ``x-claude-code-session-id``, Codex's ``session-id`` / ``thread-id``) >
metadata.session_id > the ``session_id`` inside Claude Code's ``metadata.user_id`` JSON >
``prompt_cache_key`` > user > (a Responses continuation: the session of the response it continues,
``proxy.server.response_ids.continuing``) > a hash of the first system and first user message
(stable across the turns of one conversation).

A session id is stored, logged and shown; one that looks like a secret (a client that puts its
API key in ``user``), or one longer than ``MAX_NAME_CHARS`` (whose cut could keep most of a key
the whole would be redacted for), or one holding a character that is not printable (a NUL,
which PostgreSQL refuses in text, a control character a terminal would act on, a lone
surrogate), is replaced by a hash of itself, so it still names one session. The hash is keyed
with the server secret (``salt``), as principals' names are: a plain hash of a short password
put in ``user`` could be guessed from the log."""

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
MAX_NAME_CHARS = 200  # a session name kept as the client wrote it; a longer one is hashed
# Blocks of the first system and user messages hashed at most: the hash runs on the event loop,
# and the text of a message of 190,000 blocks took ~0.1 s to gather there (no agent's opening
# message holds this many; one that does is still told apart by its first ones)
_HASHED_BLOCKS = 256


def session_key(
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    messages: list[Any] | None = None,
    salt: bytes = b"",
) -> str:
    """``messages``: the conversation in the chat view, when the body is another protocol's."""
    named = _named(headers, body)
    if named is not None:
        return _unsecret(named, salt)
    if messages is None:
        messages = body.get("messages") or []
    return _unsecret("conv:" + conversation_hash(messages), salt)


def named_session(
    headers: Mapping[str, str], body: Mapping[str, Any], salt: bytes = b""
) -> str | None:
    """``session_key`` where the headers or the body name the session; None where only the
    conversation's hash does (its messages are then needed)."""
    named = _named(headers, body)
    return None if named is None else _unsecret(named, salt)


def _unsecret(key: str, salt: bytes) -> str:
    # MAX_NAME_CHARS + 5: a "user:" name
    if len(key) <= MAX_NAME_CHARS + 5 and key.isprintable() and redact_text(key) == key:
        return key
    digest = hashlib.blake2b(key.encode(errors="surrogatepass"), digest_size=12, key=salt[:64])
    return "hashed:" + digest.hexdigest()


def header_session(headers: Mapping[str, str]) -> str | None:
    """The session a request's headers name (X-Session-Id, then the agents' own), if any."""
    for name in _SESSION_HEADERS:
        value = headers.get(name)
        if value and value.strip():
            return value.strip()
    return None


def _named(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    named = header_session(headers)
    if named is not None:
        return named
    metadata = body.get("metadata")
    meta_id = metadata.get("session_id") if isinstance(metadata, dict) else None
    if isinstance(meta_id, str) and meta_id.strip():
        return meta_id.strip()
    inner = _user_id_session(metadata.get("user_id") if isinstance(metadata, dict) else None)
    if inner:
        return inner
    cache_key = body.get("prompt_cache_key")
    if isinstance(cache_key, str) and cache_key.strip():
        return cache_key.strip()
    user = body.get("user")
    if isinstance(user, str) and user.strip():
        return "user:" + user.strip()
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
    return sid.strip() if isinstance(sid, str) and sid.strip() else None


def conversation_hash(messages: list[Any]) -> str:
    """The first system message before the first user message (the system prompt: a system
    message after it is a notice, Claude Code's environment one say, that comes and changes),
    and the first user message."""
    first: dict[str, str] = {}
    for m in messages:
        if isinstance(m, dict) and role(m) in ("system", "user") and role(m) not in first:
            content = m.get("content")
            if isinstance(content, list) and len(content) > _HASHED_BLOCKS:
                content = content[:_HASHED_BLOCKS]
            first[role(m)] = text_of(content)
        if "user" in first:
            break
    seed = f"{first.get('system', '')}\x00{first.get('user', '')}".encode()
    return hashlib.blake2b(seed, digest_size=12).hexdigest()


def parent_session_key(headers: Mapping[str, str], salt: bytes = b"") -> str | None:
    parent = headers.get("x-parent-session-id")
    return _unsecret(parent.strip(), salt) if parent and parent.strip() else None
