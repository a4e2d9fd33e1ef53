"""The admin views' authentication (a client's is ``proxy.principals``: who it is, and in
``keys`` mode whether its proxy key is accepted).

The admin views (``/ui``, ``/metrics``) follow their own rule, in every mode: with an admin key
set they need it (bearer, or the /ui session cookie derived from it); without one they answer
loopback clients only, unless ``ui.public`` opens them. In ``keys`` mode (a gateway several
tenants reach) they are closed without an admin key: a tenant on the host, or every client
through a front proxy on it that is not a trusted proxy, is a loopback client."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from proxy.errors import Forbidden, Unauthorized
from proxy.settings import AuthSettings

COOKIE = "ctxproxy_admin"
Access = Literal["key", "loopback", "public", "closed"]


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


# ----- the admin views -----


def admin_key(settings: AuthSettings) -> str:
    """The admin key from its environment variable; "" when unset (or blank)."""
    key = os.environ.get(settings.admin_key_env, "")
    return key if key.strip() else ""


def session_seconds(settings: AuthSettings) -> int:
    return int(settings.ui_session_hours * 3600)


def session_token(key: str, expires: int) -> str:
    """``expires.mac``: the expiry is signed with the admin key, so a leaked cookie dies on its
    own and changing the key ends every session."""
    mac = hmac.new(key.encode(), b"ctxproxy-ui-session:%d" % expires, hashlib.sha256)
    return f"{expires}.{mac.hexdigest()}"


def session_valid(key: str, token: str, now: float, max_age_s: int) -> bool:
    expires, _, _ = token.partition(".")
    if not (expires.isascii() and expires.isdigit() and len(expires) <= 12):
        return False
    # Not expired, and not further away than the session length allows today: a cookie signed
    # before ui_session_hours was lowered must not outlive the new setting.
    if not now < int(expires) <= now + max_age_s:
        return False
    # Bytes: compare_digest refuses str holding non-ASCII, and a cookie is anyone's to send.
    expected = session_token(key, int(expires)).encode()
    return hmac.compare_digest(token.encode("utf-8", "replace"), expected)


def is_loopback(client: Sequence[Any] | None) -> bool:
    """The ASGI scope's client (the socket's peer, or what a trusted proxy said), never a header
    read here; no client (e.g. a Unix socket without one) is not loopback."""
    if not client:
        return False
    try:
        ip = ipaddress.ip_address(str(client[0]))
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # a dual-stack socket shows 127.0.0.1 as ::ffff:127.0.0.1
    return ip.is_loopback


def admin_access(settings: AuthSettings, public: bool) -> Access:
    if admin_key(settings):
        return "key"
    if public:
        return "public"
    return "closed" if settings.mode == "keys" else "loopback"


def access_line(settings: AuthSettings, public: bool) -> str:
    """The start-up line saying who may open /ui and /metrics."""
    var = settings.admin_key_env
    return {
        "key": f"/ui and /metrics: admin key required (from {var})",
        "loopback": (
            f"/ui and /metrics: loopback clients only (no admin key in {var}; "
            "set ui.public: true to open them)"
        ),
        "public": f"/ui and /metrics: PUBLIC, no key (ui.public: true and no admin key in {var})",
        "closed": f"/ui and /metrics: closed (keys mode: set an admin key in {var} to open them)",
    }[admin_access(settings, public)]


def check_admin(
    settings: AuthSettings,
    public: bool,
    headers: Mapping[str, str],
    client: Sequence[Any] | None,
    cookie: str | None = None,
    now: float = 0.0,
) -> None:
    """Raise Unauthorized (a key would help) or Forbidden unless the admin view may be shown.
    ``cookie`` is the /ui session token, checked against ``now``."""
    if made_by_another_site(headers):
        raise Forbidden(
            "This page does not answer a request another site's page made (open it yourself)."
        )
    key = admin_key(settings)
    if key:
        presented = bearer(headers)
        if presented and _matches(presented, [key]):
            return
        if cookie and session_valid(key, cookie, now, session_seconds(settings)):
            return
        raise Unauthorized("This page needs the admin key.")
    if public:
        return
    if settings.mode == "keys":
        raise Forbidden(
            "In keys mode this page needs an admin key: set one "
            f"({settings.admin_key_env}) to open it."
        )
    if is_loopback(client):
        if loopback_host(headers.get("host")):
            return
        # a page whose own name was rebound to 127.0.0.1 (DNS rebinding) reads it from the
        # user's browser, a loopback client, under the page's name
        raise Forbidden(
            "Without an admin key this page answers requests to a loopback name only "
            "(localhost, 127.0.0.1, [::1])."
        )
    raise Forbidden(
        "This page answers loopback clients only: set an admin key "
        f"({settings.admin_key_env}) or ui.public: true to open it."
    )


def made_by_another_site(headers: Mapping[str, str]) -> bool:
    """Whether a browser says another site's page made the request (Fetch Metadata): an image,
    a script's fetch, a frame. Without an admin key the views answer the loopback browser, so any
    site it opens could have it load them, each a scan of the log, in a loop (the answer is not
    theirs to read; the work is done). The operator's own navigation (a link followed, a
    bookmark: a top-level document) is let in, as is a client that says nothing (curl, a
    scraper, an older browser). A page another port of this host serves (a dev server, a
    notebook) is ``same-site`` (a site is a scheme and a host, not a port): another page too."""
    if headers.get("sec-fetch-site", "").strip().lower() not in ("cross-site", "same-site"):
        return False
    mode = headers.get("sec-fetch-mode", "").strip().lower()
    dest = headers.get("sec-fetch-dest", "").strip().lower()
    return not (mode == "navigate" and dest == "document")


def loopback_host(host: str | None) -> bool:
    """Whether a ``Host`` header names this machine: ``localhost`` (or a name under it, which
    resolves to loopback by RFC 6761) or a loopback address, with or without a port. No header
    (HTTP/1.0) is let in: a browser always sends one."""
    if host is None:
        return True
    name = host.strip().lower()
    if name.startswith("["):  # [v6 address]:port
        name = name[1 : name.find("]")] if "]" in name else ""
    elif name.count(":") == 1:  # name:port
        name = name.partition(":")[0]
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
