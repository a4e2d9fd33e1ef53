"""What the Gemini bridge tests share: an upstream client, and a ``generateContent`` route."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from proxy.upstream.gemini_route import Route, parse_route
from proxy.upstream.openai import UpstreamClient


@pytest.fixture
async def client() -> AsyncIterator[UpstreamClient]:
    c = UpstreamClient()
    yield c
    await c.aclose()


def route(model: str, method: str = "generateContent") -> Route:
    """The route of ``/v1beta/models/{model}:{method}``."""
    found = parse_route(f"/v1beta/models/{model}:{method}")
    assert found is not None
    return found
