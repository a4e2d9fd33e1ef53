"""The refusal of a request to an upstream whose key variable (``api_key_env``) is unset or
empty, the same on every kind: sent without a key, the provider's 401 would read as the
client's own key refused, and litellm would find another key in the environment."""

from __future__ import annotations

import logging

from proxy.errors import UpstreamKeyMissing
from proxy.settings import UpstreamSettings

log = logging.getLogger("ctxproxy.upstream")


def key_missing(upstream: UpstreamSettings) -> UpstreamKeyMissing:
    """The refusal; the variable's name goes to the server log only."""
    log.error("upstream %s: its key variable %s is empty", upstream.name, upstream.api_key_env)
    return UpstreamKeyMissing(f"Upstream {upstream.name} has no API key configured.")
