"""A client's key that no HTTP header can carry (a no-break or zero-width space pasted with it,
any character past ASCII) is refused with 401 in the client's protocol, nothing
sent, where litellm calls the upstream: its HTTP client could not encode the header, and the
client got a 502 naming an upstream failure for a key of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import in_process, log_rows
from tests.proxy.upstream.test_stream_deadline import settings
from tests.support.edge_upstream import EdgeUpstream

HI = [{"role": "user", "content": "hi"}]
GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
# bridged by litellm: (path, body, the header its clients send their key in, the error shape)
CASES: dict[str, tuple[str, dict[str, Any], str, str]] = {
    "chat to anthropic": (
        "/v1/chat/completions",
        {"model": "claude-x", "messages": HI},
        "authorization",
        "openai",
    ),
    "responses to anthropic": (
        "/v1/responses",
        {"model": "claude-x", "input": "hi"},
        "authorization",
        "openai",
    ),
    "gemini to anthropic": (
        "/v1beta/models/claude-x:generateContent",
        GEMINI,
        "x-goog-api-key",
        "gemini",
    ),
    "messages to gemini": (
        "/v1/messages",
        {"model": "gemini-x", "max_tokens": 8, "messages": HI},
        "x-api-key",
        "anthropic",
    ),
}
KEYS = {
    "no-break space": b"sk-ant-abc\xc2\xa0",
    "zero-width space": b"sk-ant-abc\xe2\x80\x8b",
    "latin-1": b"AIza\xe9",
}


def _shape(body: dict[str, Any]) -> str:
    if body.get("type") == "error":
        return "anthropic"
    return "gemini" if "status" in body.get("error", {}) else "openai"


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("case", CASES)
async def test_a_key_no_header_can_carry_is_a_401(
    tmp_path: Path, edge: EdgeUpstream, case: str, key: str
) -> None:
    path, body, name, shape = CASES[case]
    value = (b"Bearer " if name == "authorization" else b"") + KEYS[key]
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as client:
        r = await client.post(path, json=body, headers={name: value})  # type: ignore[dict-item]
        rows = await log_rows(client)
    answer = orjson.loads(r.content)
    assert r.status_code == 401, answer
    assert _shape(answer) == shape
    assert "header" in r.text
    assert edge.seen == []
    assert [row["status"] for row in rows] == [401]
