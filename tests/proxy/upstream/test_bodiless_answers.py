"""An upstream answer whose status carries no body (204, 205) is relayed as the whole, empty answer
it is, on every protocol and whether a stream was asked for or not. Read as an event stream, the
relay found no last event and wrote its error event after a head that allows no body: the server
refused it mid-answer, the connection was reset and the failure went unhandled."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.conftest import LiveProxy
from tests.proxy.upstream.test_stream_deadline import settings
from tests.support.edge_upstream import EdgeUpstream, Reply

MESSAGES = {"model": "claude-x", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "gpt-4o", "input": "hi"}
GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
GEMINI_PATH = "/v1beta/models/gemini-x:"

CASES = {
    "chat": ("/v1/chat/completions", CHAT, {**CHAT, "stream": True}),
    "messages": ("/v1/messages", MESSAGES, {**MESSAGES, "stream": True}),
    "responses": ("/v1/responses", RESPONSES, {**RESPONSES, "stream": True}),
    "gemini": (GEMINI_PATH + "generateContent", GEMINI, GEMINI),
    "gemini sse": (GEMINI_PATH + "streamGenerateContent?alt=sse", GEMINI, GEMINI),
    "gemini array": (GEMINI_PATH + "streamGenerateContent", GEMINI, GEMINI),
}


@pytest.mark.parametrize("status", [204, 205])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_a_bodiless_answer_is_relayed_empty(
    live_proxy: Callable[..., LiveProxy], edge: EdgeUpstream, case: str, stream: bool, status: int
) -> None:
    path, plain, streamed = CASES[case]
    edge.reply = Reply(status, [], b"")
    proxy = live_proxy(settings(edge, 0))
    with httpx.Client(base_url=proxy.url, timeout=10) as client:
        r = client.post(
            path, json=streamed if stream else plain, headers={"authorization": "Bearer k"}
        )
    assert (r.status_code, r.content) == (status, b"")
    row = proxy.row(r.headers["x-ctxproxy-request-id"])
    assert (row["status"], row["error_type"]) == (status, None)
