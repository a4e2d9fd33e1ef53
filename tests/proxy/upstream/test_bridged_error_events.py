"""An Anthropic stream's ``error`` event, read by litellm for a client of another protocol (chat
completions, Responses, Gemini), keeps the status of its type, as the same error answered as
an HTTP status does: Anthropic's ``overloaded_error`` (its 529), often the first event of a
stream, and ``rate_limit_error`` (429). litellm's Anthropic reader raised every error event as a
500: the client got a 502 and litellm's words ("AnthropicError - Overloaded")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
