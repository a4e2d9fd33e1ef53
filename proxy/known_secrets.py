"""The secrets this server holds, named to the redaction (``rules.redact_known``) at start-up:
its proxy keys (``auth.proxy_keys_env`` and each principal's variables), its admin key and the
upstreams' keys (``api_key_env``), read from the environment as the server reads them."""

from __future__ import annotations

import os

from proxy.principals import proxy_keys
from proxy.settings import Settings
from rules.redact_known import set_known


def name_known_secrets(settings: Settings | None) -> None:
    """Name ``settings``' secrets to the redaction; None: none (the server stopped)."""
    if settings is None:
        set_known(())
        return
    auth = settings.auth
    values = list(proxy_keys(auth))
    for names in auth.principals.values():
        for name in names:
            values += [k.strip() for k in os.environ.get(name, "").split(",")]
    values.append(os.environ.get(auth.admin_key_env, ""))
    values += [os.environ.get(u.api_key_env, "") for u in settings.upstreams if u.api_key_env]
    set_known(values)
