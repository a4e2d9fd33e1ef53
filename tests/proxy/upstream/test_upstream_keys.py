"""Which key goes upstream: the upstream's own (from its environment variable), the client's
bearer only in passthrough mode, never the proxy key of ``auth.mode: keys``."""

from __future__ import annotations

import pytest

from proxy.errors import UpstreamKeyMissing
from proxy.settings import UpstreamSettings
from proxy.upstream.openai import upstream_api_key

CLIENT = {"authorization": "Bearer client-or-proxy-key"}


@pytest.mark.parametrize(
    ("mode", "key_env", "env", "expected"),
    [
        ("passthrough", None, None, "client-or-proxy-key"),
        ("passthrough", "UP_KEY", "sk-up", "sk-up"),
        ("keys", "UP_KEY", "sk-up", "sk-up"),
        ("keys", None, None, None),  # never the proxy key
        ("keys", "UP_KEY", None, UpstreamKeyMissing),  # unset: refused, never the proxy key
        ("passthrough", "UP_KEY", "", UpstreamKeyMissing),  # nor the client's own
    ],
)
def test_upstream_api_key(monkeypatch, mode, key_env, env, expected) -> None:
    monkeypatch.delenv("UP_KEY", raising=False)
    if env is not None:
        monkeypatch.setenv("UP_KEY", env)
    upstream = UpstreamSettings(name="u", api_key_env=key_env)
    if expected is UpstreamKeyMissing:
        with pytest.raises(UpstreamKeyMissing):
            upstream_api_key(upstream, CLIENT, mode)
        return
    assert upstream_api_key(upstream, CLIENT, mode) == expected
