"""An upstream answer a client cannot use, or one too large to hold, gets a 502 in the client's
protocol, with its log row finished; a client's ``Expect: 100-continue`` never reaches an
upstream (it would wait, unbounded, for an interim answer). Loopback upstream at the socket level
(``tests/support/edge_upstream.py``), the app in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.protocols.errors import gemini_error, reshaped_as_gemini
from proxy.upstream import transport
from tests.conftest import in_process, log_rows
from tests.support.edge_upstream import EdgeUpstream, Reply, protocol_settings
from tests.support.factories import chat_completion

JSON = {"content-type": "application/json", "authorization": "Bearer sk-test-client"}
CHAT = (
    "/v1/chat/completions",
    {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
)
MESSAGES = (
    "/v1/messages",
    {"model": "claude-x", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
)


def shape_of(protocol: str, answer: dict[str, Any]) -> str:
    """The error's type, read as the client's SDK reads it (Anthropic's name for ours)."""
    if protocol == "messages":
        assert answer["type"] == "error"
        return "upstream_error" if answer["error"]["type"] == "api_error" else "?"
    return str(answer["error"]["type"])


async def post(edge: EdgeUpstream, tmp_path: Path, route: tuple[str, Any]) -> tuple[Any, Any]:
    async with in_process(protocol_settings(edge), str(tmp_path / "db")) as client:
        r = await client.post(route[0], content=orjson.dumps(route[1]), headers=JSON)
        rows = await log_rows(client)
    return r, rows[-1]


@pytest.mark.parametrize("route", [CHAT, MESSAGES], ids=["chat", "messages"])
@pytest.mark.parametrize("status", [301, 302, 307, 101, 600, 999])
async def test_a_status_no_client_can_use_is_a_502(
    edge: EdgeUpstream, tmp_path: Path, route: tuple[str, Any], status: int
) -> None:
    secret = b'{"note": "moved", "key": "sk-proj-abcdefghijklmnopqrstuvwxyz012345"}'
    edge.reply = Reply(status=status, headers=[("location", "http://elsewhere/")], body=secret)
    r, row = await post(edge, tmp_path, route)
    assert r.status_code == 502, r.text
    protocol = "messages" if route is MESSAGES else "chat"
    assert shape_of(protocol, r.json()) == "upstream_error"
    assert f"HTTP {status}" in r.text and b"sk-proj" not in r.content
    assert "location" not in r.headers
    assert row["status"] == 502 and row["error_type"] == "upstream_error"
    assert len(edge.seen) == 1  # not followed


async def test_a_success_answer_over_its_bound_is_a_502(
    edge: EdgeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transport, "MAX_ANSWER_BYTES", 64 * 1024)
    big = chat_completion("x " * 40_000)
    edge.reply = Reply.json(big)
    r, row = await post(edge, tmp_path, CHAT)
    assert r.status_code == 502 and "larger than" in r.json()["error"]["message"]
    assert row["status"] == 502
    monkeypatch.setattr(transport, "MAX_ANSWER_BYTES", 1024 * 1024)  # the same answer, bound met
    r, row = await post(edge, tmp_path, CHAT)
    assert r.status_code == 200 and r.json() == big


@pytest.mark.parametrize("chunked", [False, True])
async def test_an_error_answer_over_its_bound_is_cut(
    edge: EdgeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunked: bool
) -> None:
    monkeypatch.setattr(transport, "MAX_ERROR_ANSWER_BYTES", 4096)
    page = b"<html>" + b"overloaded " * 10_000 + b"</html>"
    edge.reply = Reply(status=529, headers=[("content-type", "text/html")], body=page)
    if chunked:
        edge.reply.chunks = [page[i : i + 1000] for i in range(0, len(page), 1000)]
    r, row = await post(edge, tmp_path, MESSAGES)
    assert r.status_code == 529  # the provider's status, and the start of what it said
    assert r.json()["error"]["message"].startswith("<html>overloaded overloaded")
    assert r.headers["content-type"] == "application/json"  # the body is JSON now, not HTML
    assert len(r.content) <= 4096 + 100  # in Anthropic's error shape
    assert row["status"] == 529


@pytest.mark.parametrize(
    ("said", "message"),
    [
        ({"detail": "Model is loading"}, "Model is loading"),
        ({"error": "rate limited"}, "rate limited"),
        ({"message": "no capacity"}, "no capacity"),
        ({"error": {"message": "bad key", "type": "x"}}, "bad key"),
        ({"unknown": 1}, "Upstream error."),
    ],
)
async def test_an_error_in_another_shape_keeps_what_it_says(
    edge: EdgeUpstream, tmp_path: Path, said: dict[str, Any], message: str
) -> None:
    edge.reply = Reply(status=503, headers=[("content-type", "application/json")],
                       body=orjson.dumps(said))  # fmt: skip
    r, _ = await post(edge, tmp_path, MESSAGES)
    assert r.status_code == 503
    assert r.json()["type"] == "error" and r.json()["error"]["message"] == message
    assert reshaped_as_gemini(503, orjson.dumps(said)) == gemini_error(503, message)


@pytest.mark.parametrize("route", [CHAT, MESSAGES], ids=["chat", "messages"])
async def test_expect_100_continue_is_not_forwarded(
    edge: EdgeUpstream, tmp_path: Path, route: tuple[str, Any]
) -> None:
    edge.reply = Reply.json(chat_completion("ok")) if route is CHAT else Reply.json(
        {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
         "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
         "usage": {"input_tokens": 1, "output_tokens": 1}}
    )  # fmt: skip
    async with in_process(protocol_settings(edge), str(tmp_path / "db")) as client:
        r = await client.post(
            route[0], content=orjson.dumps(route[1]), headers={**JSON, "expect": "100-continue"}
        )
    assert r.status_code == 200, r.text
    assert edge.last.header("expect") is None
