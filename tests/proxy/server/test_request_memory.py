"""A request's peak memory is a bounded multiple of its body (docs/security.md, "Limits"): at
most ``MULTIPLE`` times the body's bytes, a body counting at least ``ITEM_FLOOR`` bytes per item
(a message or input item costs the rules a few kilobytes however short it is); and a body is held
to ``limits.max_items`` items, so a body of tiny items is refused, not worked on. Measured with
tracemalloc around the whole request in-process (read, parse, rewrite, forward, log), after a
warm-up request of the same protocol, so one-off loads (tables, packs) are not counted.

Before: a body of 100,000 tiny items was accepted at ~175× its size (500 MiB for 2.9 MiB), and
orjson's spare buffer space (4 KiB a message written) was most of it."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.settings import LimitSettings
from tests.conftest import in_process
from tests.support.edge_upstream import EdgeUpstream, protocol_settings

MULTIPLE = 32
ITEM_FLOOR = 256
JSON = {"content-type": "application/json"}
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def body(protocol: str, n: int, size: int, salt: str = "") -> bytes:
    text = salt + "a" * size
    if protocol == "messages":
        items = [
            {"role": "user", "content": [{"type": "text", "text": f"{i} {text}"}]} for i in range(n)
        ]
        return orjson.dumps({"model": "claude-x", "max_tokens": 5, "messages": items})
    items = [{"role": "user", "content": f"{i} {text}"} for i in range(n)]
    key = "input" if protocol == "responses" else "messages"
    return orjson.dumps({"model": "gpt-4o", key: items})


async def peak_of(client: httpx.AsyncClient, path: str, raw: bytes) -> tuple[int, httpx.Response]:
    """The traced memory's peak over the request, above what was held before it."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        response = await client.post(path, content=raw, headers=JSON, timeout=300)
        return tracemalloc.get_traced_memory()[1] - base, response
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("protocol", "n", "size"),
    [
        ("chat", 20_000, 1),  # at limits.max_items, tiny: the floor counts
        ("responses", 20_000, 1),
        ("messages", 20_000, 1),
        ("messages", 2_000, 4_000),  # 8 MiB of text: the bytes count
    ],
)
async def test_peak_memory_is_a_bounded_multiple_of_the_body(
    edge: EdgeUpstream, tmp_path: Path, protocol: str, n: int, size: int
) -> None:
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:
        path = PATHS[protocol]
        warm = await client.post(path, content=body(protocol, 50, size, "w"), headers=JSON)
        assert warm.status_code == 200
        raw = body(protocol, n, size)
        peak, response = await peak_of(client, path, raw)
        edge.seen.clear()
        assert response.status_code == 200, response.text[:300]
        weighed = max(len(raw), ITEM_FLOOR * n)
        assert peak <= MULTIPLE * weighed, (
            f"peak {peak / 2**20:.0f} MiB = {peak / weighed:.1f}× the body as weighed "
            f"({len(raw) / 2**20:.1f} MiB, {n} items)"
        )


async def test_a_body_of_too_many_items_is_refused_within_the_bound(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:
        warm = await client.post(
            PATHS["responses"], content=body("responses", 50, 1, "w"), headers=JSON
        )
        assert warm.status_code == 200
        raw = body("responses", 100_000, 1)
        peak, response = await peak_of(client, PATHS["responses"], raw)
        assert response.status_code == 400
        error: dict[str, Any] = response.json()["error"]
        assert (error["code"], error["param"]) == ("too_many_items", "input")
        assert peak <= MULTIPLE * len(raw), f"peak {peak / len(raw):.1f}× the body"


async def test_the_limits_are_answered_in_each_protocol_s_shape(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    settings = protocol_settings(edge).model_copy(
        update={"limits": LimitSettings(max_items=10, max_json_containers=1_000)}
    )
    async with in_process(settings, str(tmp_path / "p.db")) as client:
        for protocol, path in [*PATHS.items(), ("messages", "/v1/messages/count_tokens")]:
            response = await client.post(path, content=body(protocol, 11, 1), headers=JSON)
            assert response.status_code == 400, (path, response.text)
            if protocol == "messages":  # Anthropic's shape
                error = response.json()
                assert error["type"] == "error"
                assert error["error"]["type"] == "invalid_request_error"
                assert "limits.max_items" in error["error"]["message"]
            else:
                assert response.json()["error"]["code"] == "too_many_items"
            nested = [[]] * 1_001
            many = orjson.dumps(
                {"model": "gpt-4o", "messages": [{"role": "user", "content": nested}]}
            )
            response = await client.post(path, content=many, headers=JSON)
            assert response.status_code == 400
            assert "limits.max_json_containers" in response.text
