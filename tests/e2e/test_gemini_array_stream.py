"""Google's JSON-array stream (``:streamGenerateContent`` without ``alt=sse``) through a live
proxy from a scripted Gemini upstream that writes its elements slowly: each element reaches the
client as soon as it is whole, long before the upstream ends its answer, the bytes as the
upstream wrote them, and the usage of the last element is logged."""

from __future__ import annotations

import json
import time

import httpx
import orjson

from tests.support.agent_proxy import completed_rows
from tests.support.gemini_upstream import GEMINI_USAGE
from tests.support.protocol_upstreams import Turn, text

MODEL = "gemini-2.5-flash"
KEY = "AIzaSyDummyArrayKey00000000000000000000"
BODY = {"contents": [{"role": "user", "parts": [{"text": "count to three"}]}]}
PACE_S = 0.6
_DECODER = json.JSONDecoder()  # reads a JSON value at the start of a longer text


def _first_element(received: bytes) -> dict | None:  # type: ignore[type-arg]
    """The array's first element once it is whole in ``received`` (read as the client would)."""
    start = received.find(b"{")
    if start < 0:
        return None
    try:
        value, _ = _DECODER.raw_decode(received[start:].decode("utf-8", "replace"))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def test_each_element_reaches_the_client_before_the_upstream_ends(  # type: ignore[no-untyped-def]
    gemini_upstream, gemini_proxy
) -> None:
    gemini_upstream.array_pace_s = PACE_S
    gemini_upstream.turns.append(Turn([text("one"), text("two"), text("three")]))
    proxy = gemini_proxy()
    received = bytearray()
    first_at: float | None = None
    url = f"{proxy.url}/v1beta/models/{MODEL}:streamGenerateContent"
    headers = {"x-goog-api-key": KEY, "content-type": "application/json"}
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", url, content=orjson.dumps(BODY), headers=headers) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/json")
        for chunk in response.iter_raw():
            received += chunk
            if first_at is None and _first_element(bytes(received)) is not None:
                first_at = time.monotonic()
    ended_at = gemini_upstream.array_done[-1]
    assert first_at is not None
    # the upstream wrote two more elements and the closing bracket, PACE_S apart, after it
    assert ended_at - first_at > 2 * PACE_S
    assert bytes(received) == bytes(gemini_upstream.array_sent[-1])
    elements = orjson.loads(bytes(received))
    words = [e["candidates"][0]["content"]["parts"][0]["text"] for e in elements]
    assert words == ["one", "two", "three"]
    rows = completed_rows(proxy, 1)
    assert rows[-1]["protocol"] == "gemini" and rows[-1]["stream"] == 1
    assert rows[-1]["status"] == 200
    assert rows[-1]["prompt_tokens"] == GEMINI_USAGE["promptTokenCount"]
    assert rows[-1]["cached_tokens"] == GEMINI_USAGE["cachedContentTokenCount"]
