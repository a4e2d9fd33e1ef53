"""An Anthropic stream's ``error`` event, read by litellm for a client of another protocol (chat
completions, Responses, Gemini), keeps the status of its type, as the same error answered as
an HTTP status does: Anthropic's ``overloaded_error`` (its 529), often the first event of a
stream, and ``rate_limit_error`` (429). litellm's Anthropic reader raised every error event as a
500: the client got a 502 and litellm's words ("AnthropicError - Overloaded")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proxy.settings import Settings, settings_from_mapping
from tests.conftest import in_process, log_rows
from tests.proxy.upstream.test_bridge_stream_open import fresh_clients  # noqa: F401
from tests.proxy.upstream.test_stream_deadline import settings
from tests.support.anthropic_upstream import event, message_events, sse_reply
from tests.support.edge_upstream import EdgeUpstream

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

ASK = [{"role": "user", "content": "hi"}]
CLIENTS = {
    "chat": ("/v1/chat/completions", {"model": "claude-x", "messages": ASK, "stream": True}),
    "responses": ("/v1/responses", {"model": "claude-x", "input": "hi", "stream": True}),
    "gemini": (
        "/v1beta/models/claude-x:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
}
ERRORS = {"overloaded_error": (529, "Overloaded"), "rate_limit_error": (429, "Slow down")}


@pytest.mark.parametrize("kind", ERRORS)
@pytest.mark.parametrize("client", CLIENTS)
async def test_an_error_event_first_keeps_its_status(
    tmp_path: Path, edge: EdgeUpstream, client: str, kind: str
) -> None:
    status, said = ERRORS[kind]
    edge.reply = sse_reply([event("error", error={"type": kind, "message": said})])
    path, body = CLIENTS[client]
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers={"authorization": "Bearer k"})
        (row,) = await log_rows(c)
    assert r.status_code == status, r.text
    assert said in r.text and "AnthropicError" not in r.text
    assert row["status"] == status


@pytest.mark.parametrize("client", CLIENTS)
async def test_an_error_event_mid_stream_keeps_its_words(
    tmp_path: Path, edge: EdgeUpstream, client: str
) -> None:
    cut = message_events("Hello there")[:4]
    edge.reply = sse_reply([*cut, event("error", error={"type": "overloaded_error",
                                                          "message": "Overloaded"})])  # fmt: skip
    path, body = CLIENTS[client]
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers={"authorization": "Bearer k"})
        (row,) = await log_rows(c)
    assert r.status_code == 200 and b"Hello" in r.content
    assert b"Overloaded" in r.content and b"AnthropicError" not in r.content, r.content
    assert row["error_type"] is not None


def _litellm_claude(edge: EdgeUpstream) -> Settings:
    """Claude through litellm's anthropic provider: a Messages client is bridged to it."""
    return settings_from_mapping(
        {
            "upstreams": [
                {
                    "name": "claude",
                    "kind": "litellm",
                    "provider": "anthropic",
                    "match": ["*"],
                    "base_url": edge.url,
                }
            ],
            "pipeline": {"on_rule_error": "fail"},
        }
    )


MESSAGES = {"model": "claude-x", "max_tokens": 50, "messages": ASK, "stream": True}


@pytest.mark.parametrize("kind", ERRORS)
async def test_a_bridged_messages_stream_error_first_keeps_its_status(
    tmp_path: Path, edge: EdgeUpstream, kind: str
) -> None:
    status, said = ERRORS[kind]
    edge.reply = sse_reply([event("error", error={"type": kind, "message": said})])
    async with in_process(_litellm_claude(edge), str(tmp_path / "db")) as c:
        r = await c.post("/v1/messages", json=MESSAGES, headers={"x-api-key": "k"})
        (row,) = await log_rows(c)
    assert r.status_code == status, r.text
    assert r.json()["error"]["type"] == kind, r.text
    assert said in r.text and "AnthropicError" not in r.text
    assert row["status"] == status


async def test_a_bridged_messages_stream_error_mid_stream_has_its_type(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    cut = message_events("Hello there")[:4]
    edge.reply = sse_reply([*cut, event("error", error={"type": "overloaded_error",
                                                          "message": "Overloaded"})])  # fmt: skip
    async with in_process(_litellm_claude(edge), str(tmp_path / "db")) as c:
        r = await c.post("/v1/messages", json=MESSAGES, headers={"x-api-key": "k"})
        (row,) = await log_rows(c)
    assert r.status_code == 200 and b"Hello" in r.content
    assert b'"overloaded_error"' in r.content and b"AnthropicError" not in r.content, r.content
    assert row["error_type"] == "overloaded_error", row["error_type"]


@pytest.mark.parametrize("client", CLIENTS)
async def test_an_api_error_mid_stream_has_a_type_word(
    tmp_path: Path, edge: EdgeUpstream, client: str
) -> None:
    """Anthropic's catch-all ``api_error`` mid-stream: litellm raises it as its own class
    (``MidStreamFallbackError``), whose name is no error type of any protocol."""
    cut = message_events("Hello there")[:4]
    edge.reply = sse_reply([*cut, event("error", error={"type": "api_error", "message": "Boom"})])
    path, body = CLIENTS[client]
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers={"authorization": "Bearer k"})
        (row,) = await log_rows(c)
    assert r.status_code == 200 and b"Boom" in r.content
    assert b"MidStreamFallbackError" not in r.content, r.content
    assert row["error_type"] == "api_error"
