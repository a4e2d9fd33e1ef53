"""The identifiers a body carries for the provider, scoped to the principal where every tenant
shares the server's key.

OpenAI's ``user``, ``safety_identifier`` and ``prompt_cache_key`` and Anthropic's
``metadata.user_id`` name an end user of the provider account (whom its abuse checks blame) and a
route onto its prompt cache. Behind the server's key every tenant is one account: a tenant could
send another's identifier, and be taken for it (a ban, a rate limit of that end user) or land on
its cache route. So they are sent as a keyed hash of (principal, value): stable, so a tenant's
own attribution and cache routing hold, and never equal across tenants. With the client's own
key they are its account's, and go as sent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# top-level string fields naming an end user or a cache route (Chat Completions, Responses)
_FIELDS = ("user", "safety_identifier", "prompt_cache_key")


def scoped_ids(body: dict[str, Any], label: Callable[[str], str]) -> dict[str, Any]:
    """``body`` with each identifier replaced by ``label(value)`` (a new dict, the metadata
    copied where it changes); ``body`` itself when it holds none."""
    out: dict[str, Any] | None = None
    for name in _FIELDS:
        value = body.get(name)
        if isinstance(value, str) and value:
            out = out if out is not None else dict(body)
            out[name] = label(value)
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        user_id = metadata.get("user_id")
        if isinstance(user_id, str) and user_id:
            out = out if out is not None else dict(body)
            out["metadata"] = {**metadata, "user_id": label(user_id)}
    return body if out is None else out
