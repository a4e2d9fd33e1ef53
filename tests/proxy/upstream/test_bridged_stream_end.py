"""A Gemini upstream's stream read by litellm (a chat, Messages or Responses client bridged to it)
that ends before its answer's last chunk is a break: the client gets its protocol's error event,
not a whole-looking answer, and the row says so. litellm's own Gemini reader took any end as the
answer's and wrote a ``stop`` finish. A whole stream, and a refused prompt's (a
``promptFeedback.blockReason`` and no candidate), end as they did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.litellm_gemini_end import answer_ends
from proxy.providers import load_litellm
from tests.conftest import in_process, log_rows
from tests.proxy.upstream.test_stream_deadline import settings
from tests.support.anthropic_upstream import sse_reply
from tests.support.edge_upstream import EdgeUpstream
from tests.support.factories import request, user

ASK = [{"role": "user", "content": "hi"}]
CLIENTS = {
    "chat": ("/v1/chat/completions", request(user("hi"), stream=True, model="gemini-x")),
    "messages": (
        "/v1/messages",
        {"model": "gemini-x", "max_tokens": 64, "messages": ASK, "stream": True},
    ),
    "responses": ("/v1/responses", {"model": "gemini-x", "input": "hi", "stream": True}),
}
# each protocol's sign of a whole answer, and of its error event
WHOLE = {"chat": b'"finish_reason":"stop"', "messages": b"message_stop", "responses": b"completed"}
ERROR = {"chat": b'data: {"error"', "messages": b"event: error", "responses": b"event: error"}


@pytest.fixture(autouse=True)
def fresh_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm's clients belong to an event loop, and each test's app runs its own."""
    litellm = load_litellm()
    from litellm.caching.llm_caching_handler import LLMClientCache
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    monkeypatch.setattr(litellm, "in_memory_llm_clients_cache", LLMClientCache())
    monkeypatch.setattr(litellm, "module_level_aclient", AsyncHTTPHandler(), raising=False)


def _chunks(*chunks: dict[str, Any]) -> list[bytes]:
    return [b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks]


def _text(text: str, finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


def _call(args: str) -> dict[str, Any]:
    part = {"functionCall": {"name": "bash", "args": {"command": args}}}
    return {"candidates": [{"content": {"parts": [part], "role": "model"}}]}


async def _relayed(edge: EdgeUpstream, tmp_path: Path, client: str, chunks: list[bytes]) -> Any:
    path, body = CLIENTS[client]
    edge.reply = sse_reply(chunks)
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers={"authorization": "Bearer k"})
        (row,) = await log_rows(c)
    return r, row


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    "cut", [_chunks(_text("Let me ")), _chunks(_text("Running "), _call("rm -rf build"))]
)
async def test_a_cut_gemini_stream_ends_in_an_error_event(
    tmp_path: Path, edge: EdgeUpstream, client: str, cut: list[bytes]
) -> None:
    r, row = await _relayed(edge, tmp_path, client, cut)
    assert r.status_code == 200  # the head went before the break
    assert ERROR[client] in r.content and WHOLE[client] not in r.content
    assert row["error_type"] is not None


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    "whole",
    [
        _chunks(_text("Done"), _text(".", "STOP")),
        _chunks(_text("Done.", "MAX_TOKENS")),
        _chunks({"promptFeedback": {"blockReason": "SAFETY"}}),
    ],
)
async def test_a_whole_gemini_stream_ends_as_it_did(
    tmp_path: Path, edge: EdgeUpstream, client: str, whole: list[bytes]
) -> None:
    r, row = await _relayed(edge, tmp_path, client, whole)
    assert r.status_code == 200
    assert ERROR[client] not in r.content
    assert row["error_type"] is None, row["error"]


@pytest.mark.parametrize("client", CLIENTS)
async def test_a_malformed_function_call_ends_in_an_error_event(
    tmp_path: Path, edge: EdgeUpstream, client: str
) -> None:
    """Gemini ends an answer whose function call it could not form with
    ``MALFORMED_FUNCTION_CALL`` and no content: litellm wrote it as a finished, empty answer
    (``end_turn``, ``stop``, ``completed``), which an agent took for its last word and stopped;
    now the client gets an error (a 502 before anything was relayed, an error event after), and
    retries."""
    chunk = {
        "candidates": [{"content": {"role": "model"}, "finishReason": "MALFORMED_FUNCTION_CALL"}]
    }
    r, row = await _relayed(edge, tmp_path, client, _chunks(chunk))
    assert r.status_code == 502 or ERROR[client] in r.content, r.content
    assert WHOLE[client] not in r.content and row["error_type"] is not None
    # said as what happened: the upstream was reached, its model's call was broken
    assert b"function call could not be read" in r.content, r.content
    assert b"could not be reached" not in r.content
    (tmp_path / "after").mkdir()
    r, row = await _relayed(
        edge, tmp_path / "after", client, _chunks(_text("Let me run it. "), chunk)
    )
    assert r.status_code == 200 and ERROR[client] in r.content, r.content
    assert WHOLE[client] not in r.content and row["error_type"] is not None


def test_the_answers_end_is_a_finish_reason_or_a_blocked_prompt() -> None:
    assert answer_ends(_text("x", "STOP")) and answer_ends({"promptFeedback": {"blockReason": "X"}})
    assert not answer_ends(_text("x")) and not answer_ends({"promptFeedback": {}})
    assert not answer_ends({"candidates": "bad"}) and not answer_ends([])


def _hop_end(text: str) -> dict[str, Any]:
    """A hop litellm continues (an answer cut at its output cap, a token to go on with)."""
    chunk = _text(text, "CONTINUATION")
    chunk["candidates"][0]["continuationToken"] = "tok1"
    chunk["usageMetadata"] = {"promptTokenCount": 5, "candidatesTokenCount": 10,
                              "totalTokenCount": 15}  # fmt: skip
    return chunk


@pytest.mark.parametrize("cut", [True, False])
async def test_each_hop_of_a_continued_answer_must_end(
    tmp_path: Path, edge: EdgeUpstream, cut: bool
) -> None:
    """litellm continues an answer in a second request: the first hop's end is not the
    answer's, so a second hop cut short is a break too."""
    edge.replies = [sse_reply(_chunks(_text("start "), _hop_end("part one ")))]
    second = _chunks(_text("second hop")) if cut else _chunks(_text("second hop", "STOP"))
    edge.reply = sse_reply(second)
    body = request(user("hi"), stream=True, model="gemini-x", max_tokens=1000)
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json=body, headers={"authorization": "Bearer k"})
        (row,) = await log_rows(c)
    assert b"second hop" in r.content  # the hop was taken
    assert (ERROR["chat"] in r.content) is cut and (WHOLE["chat"] in r.content) is not cut
    assert (row["error_type"] is not None) is cut
