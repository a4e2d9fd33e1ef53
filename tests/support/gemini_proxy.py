"""A live ctxproxy (served as ``ctxproxy serve`` serves it) in front of the scripted Gemini
upstream (``tests/support/gemini_upstream.py``): ``gemini-*`` goes to a ``gemini``-kind upstream.
Fixtures for the Gemini e2e tests (``tests/e2e/conftest.py`` exposes them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.gemini_upstream import GeminiUpstream, start_gemini_upstream
from tests.support.live import stop

if TYPE_CHECKING:
    from proxy.settings import Settings
    from tests.conftest import LiveProxy


def gemini_settings(url: str, **overrides: Any) -> Settings:
    from proxy.settings import settings_from_mapping

    data: dict[str, Any] = {
        "upstreams": [
            {"name": "gemini-fake", "kind": "gemini", "match": ["gemini-*"], "base_url": url}
        ],
        "pipeline": {"on_rule_error": "fail", "context_windows": {"gemini-*": 1_000_000}},
    }
    data.update(overrides)
    return settings_from_mapping(data)


@pytest.fixture(scope="session")
def _gemini_server() -> Iterator[GeminiUpstream]:
    up = start_gemini_upstream()
    yield up
    up.stop()


@pytest.fixture
def gemini_upstream(_gemini_server: GeminiUpstream) -> GeminiUpstream:
    _gemini_server.reset()
    _gemini_server.max_input_tokens = 1_000_000
    _gemini_server.require_signatures = False
    _gemini_server.array_pace_s = 0.0
    _gemini_server.array_done.clear()
    _gemini_server.array_sent.clear()
    return _gemini_server


@pytest.fixture
def gemini_proxy(
    gemini_upstream: GeminiUpstream, tmp_path: Path
) -> Iterator[Callable[..., LiveProxy]]:
    """``gemini_proxy(**overrides)``: a live proxy in front of the scripted Gemini upstream."""
    servers = []

    def start(settings: Settings | None = None, **overrides: Any) -> LiveProxy:
        from tests.conftest import LiveProxy
        from tests.support.served import serve_like_cli

        settings = settings or gemini_settings(gemini_upstream.url, **overrides)
        db = str(tmp_path / f"gemini-proxy{len(servers)}.db")
        server, url = serve_like_cli(settings, db)
        servers.append(server)
        return LiveProxy(url, db)

    yield start
    for server in servers:
        stop(server)
