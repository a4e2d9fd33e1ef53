"""A Gemini client bridged to an OpenAI-shaped upstream through litellm is told the tokens its
provider read from the cache (``cachedContentTokenCount``), streamed or not, and the row records
them: litellm's mapping dropped them, so the log and the cost said none were cached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.litellm_gemini_usage import cached_tokens
from proxy.providers import load_litellm
from tests.conftest import in_process, log_rows
from tests.proxy.upstream.test_stream_deadline import settings
from tests.support.anthropic_upstream import sse_reply
from tests.support.edge_upstream import EdgeUpstream, Reply

GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
USAGE = {
    "prompt_tokens": 100,
    "completion_tokens": 2,
    "total_tokens": 102,
    "prompt_tokens_details": {"cached_tokens": 64},
}


@pytest.fixture(autouse=True)
def fresh_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm's clients belong to an event loop, and each test's app runs its own."""
    litellm = load_litellm()
    from litellm.caching.llm_caching_handler import LLMClientCache
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    monkeypatch.setattr(litellm, "in_memory_llm_clients_cache", LLMClientCache())
    monkeypatch.setattr(litellm, "module_level_aclient", AsyncHTTPHandler(), raising=False)


def _answer() -> dict[str, Any]:
    message = {"role": "assistant", "content": "ok"}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return {"id": "c", "object": "chat.completion", "model": "gpt-4o", "choices": [choice],
            "usage": USAGE}  # fmt: skip


def _stream() -> list[bytes]:
    base = {"id": "c", "object": "chat.completion.chunk", "model": "gpt-4o"}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": USAGE},  # include_usage's last chunk
    ]
    return [b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


# litellm reads a usage-only chunk through a pydantic attribute pydantic 2.11 deprecated: its
# warning, not a failure (outside the tests a DeprecationWarning is not shown)
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211")
@pytest.mark.parametrize("stream", [False, True])
async def test_the_cache_read_reaches_a_bridged_gemini_client(
    tmp_path: Path, edge: EdgeUpstream, stream: bool
) -> None:
    edge.reply = sse_reply(_stream()) if stream else Reply.json(_answer())
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        r = await c.post(
            f"/v1beta/models/gpt-4o:{method}", json=GEMINI, headers={"authorization": "Bearer k"}
        )
        (row,) = await log_rows(c)
    assert r.status_code == 200
    last = r.content.rsplit(b"data: ", 1)[-1] if stream else r.content
    usage = orjson.loads(last)["usageMetadata"]
    assert usage["promptTokenCount"] == 100 and usage["cachedContentTokenCount"] == 64
    assert (row["prompt_tokens"], row["cached_tokens"]) == (100, 64)


def test_a_cache_read_is_a_positive_count_only() -> None:
    assert cached_tokens({"prompt_tokens_details": {"cached_tokens": 5}}) == 5
    for usage in ({}, None, {"prompt_tokens_details": None},
                  {"prompt_tokens_details": {"cached_tokens": True}},
                  {"prompt_tokens_details": {"cached_tokens": -3}}):  # fmt: skip
        assert cached_tokens(usage) == 0
