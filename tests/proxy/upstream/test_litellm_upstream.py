"""The litellm path (non-OpenAI providers), with the provider mocked at the network edge (respx)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
import respx

from tests.conftest import in_process, proxy_settings
from tests.support.factories import anthropic_message, request, user

# litellm must use httpx (not aiohttp) for respx to see its calls; set before it is imported.
os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"

ANTHROPIC_REPLY = anthropic_message(
    "Bonjour from Claude",
    model="claude-3-5-sonnet-20241022",
    usage={"input_tokens": 12, "output_tokens": 4, "cache_read_input_tokens": 6},
)


@pytest.fixture
def settings():
    return proxy_settings(
        "http://unused.test/v1",
        upstreams=[
            {
                "name": "anthropic",
                "match": ["anthropic/*"],
                "kind": "litellm",
                "api_key_env": "ANTHROPIC_TEST_KEY",
            }
        ],
    )


async def test_anthropic_through_litellm(tmp_path: Path, settings, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_TEST_KEY", "sk-ant-test-000000000")
    with respx.mock(assert_all_called=False) as mock:
        mock.route(host="proxy").pass_through()
        route = mock.post("https://api.anthropic.com/v1/messages").respond(json=ANTHROPIC_REPLY)
        async with in_process(settings, str(tmp_path / "db")) as client:
            body = request(
                {"role": "system", "content": "Be French."},
                user("hello"),
                model="anthropic/claude-3-5-sonnet-20241022",
                max_tokens=50,
            )
            r = await client.post("/v1/chat/completions", json=body)
            assert r.status_code == 200, r.text
            data = r.json()
            assert data["choices"][0]["message"]["content"] == "Bonjour from Claude"
            sent = orjson.loads(route.calls.last.request.content)
            assert sent["system"] == [{"type": "text", "text": "Be French."}]
            assert route.calls.last.request.headers["x-api-key"] == "sk-ant-test-000000000"
            store = client.app.state.services.store
            await store.flush()
            row = (await store.list_requests())[0]
            assert row["status"] == 200 and row["upstream"] == "anthropic"
            # litellm folds cache reads into prompt_tokens (12 + 6) and reports them as cached
            assert (row["prompt_tokens"], row["cached_tokens"]) == (18, 6)


async def test_anthropic_error_status_passes_through(tmp_path: Path, settings, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_TEST_KEY", "sk-ant-test-000000000")
    err = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad thing"}}
    with respx.mock(assert_all_called=False) as mock:
        mock.route(host="proxy").pass_through()
        mock.post("https://api.anthropic.com/v1/messages").respond(400, json=err)
        async with in_process(settings, str(tmp_path / "db")) as client:
            body = request(
                user("hello"), model="anthropic/claude-3-5-sonnet-20241022", max_tokens=50
            )
            r = await client.post("/v1/chat/completions", json=body)
            assert r.status_code == 400
            assert "bad thing" in r.json()["error"]["message"]
