"""Client authentication. ``passthrough``: the client's own key goes upstream (sidecar default).
``keys``: clients present a proxy key (from the environment), compared in constant time."""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping

from proxy.errors import Unauthorized
from proxy.settings import AuthSettings


def bearer(headers: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return headers.get("x-api-key") or None


def _matches(candidate: str, keys: list[str]) -> bool:
    # Compare against every key, so timing does not tell which one (or whether any) was close.
    found = False
    for key in keys:
        found |= hmac.compare_digest(candidate.encode(), key.encode())
    return found


def proxy_keys(settings: AuthSettings) -> list[str]:
    raw = os.environ.get(settings.proxy_keys_env, "")
    return [k.strip() for k in raw.split(",") if k.strip()]


def check_client(settings: AuthSettings, headers: Mapping[str, str]) -> None:
    """Raise Unauthorized unless the request may use the proxy."""
    if settings.mode == "passthrough":
        return
    presented = bearer(headers)
    keys = proxy_keys(settings)
    if not presented or not keys or not _matches(presented, keys):
        raise Unauthorized("Invalid or missing proxy API key.")


def check_admin(settings: AuthSettings, headers: Mapping[str, str], cookie: str | None) -> None:
    """The UI and other read-only admin views: an admin key is needed when auth.mode is keys."""
    if settings.mode == "passthrough":
        return
    admin = os.environ.get(settings.admin_key_env, "")
    presented = bearer(headers) or cookie
    if not admin or not presented or not _matches(presented, [admin]):
        raise Unauthorized("This page needs the admin key.")
