"""A captured stream keeps no secret the model wrote in pieces: each event's text is harmless
alone, the joined text is not. And a captured answer's redaction, which can take long on text
dense in secret names, runs off the event loop."""

from __future__ import annotations

import threading
from pathlib import Path

import orjson
import pytest

from proxy.server import log_fields
from proxy.server.captured_stream import redact_split_secrets, split_pieces
from proxy.server.log_fields import captured_text
from rules.redact import REDACTED
from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import Reply
from tests.support.factories import request, user

KEY = "sk-proj-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0"


def _chat_events(pieces: list[str]) -> bytes:
    events = [{"id": "c1", "choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
    return b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def _anthropic_events(pieces: list[str]) -> bytes:
    lines = []
    for p in pieces:
        delta = {"type": "input_json_delta", "partial_json": p}
        event = {"type": "content_block_delta", "index": 1, "delta": delta}
        lines.append(b"event: content_block_delta\ndata: " + orjson.dumps(event) + b"\n\n")
    return b"".join(lines)


@pytest.mark.parametrize(
    ("pieces", "kept"),
    [
        ([f"Your key is {KEY[:12]}", KEY[12:25], KEY[25:] + " and done."], ["Your key is "]),
        (["export DB_PASS", "WORD=hun", "ter2", "\nnext line"], ["export DB_PASS", "next line"]),
        ([f"a {KEY[:20]}", f"{KEY[20:]} b, then pass", "word=x9secret c"], ["a ", " c"]),
        (["see ", KEY[:9], "", KEY[9:], " ok"], ["see ", " ok"]),
    ],
    ids=["key-in-three", "password-value-split", "two-secrets", "empty-piece-between"],
)
def test_a_secret_split_across_events_is_not_captured(pieces: list[str], kept: list[str]) -> None:
    body = _chat_events(pieces)
    out = captured_text(body)
    joined = "".join(
        orjson.loads(line[6:])["choices"][0]["delta"]["content"]
        for line in out.splitlines()
        if line.startswith("data: {")
    )
    assert REDACTED in joined
    for secret in (KEY, KEY[8:20], KEY[20:], "hunter2", "ter2", "x9secret"):
        assert secret not in joined
    for text in kept:
        assert text in joined


def test_a_tool_calls_arguments_streamed_in_pieces() -> None:
    pieces = ['{"command": "curl -H \'Authorization: Bearer ', KEY[:15], KEY[15:] + "' x\"}"]
    out = captured_text(_anthropic_events(pieces))
    assert KEY[:15] not in out and KEY[15:] not in out
    assert out.count("event: content_block_delta") == 3  # the stream's shape stays


def test_pieces_that_hold_no_split_secret_stay() -> None:
    whole = f"the key {KEY} is whole"
    assert split_pieces(["before ", whole, " after"]) == {}  # the event's own redaction has it
    assert split_pieces(["no ", "secret ", "here"]) == {}
    text = _chat_events(["plain ", "prose"]).decode()
    assert redact_split_secrets(text) == text


def test_a_pieces_secret_and_its_neighbours_text_are_told_apart() -> None:
    marked = split_pieces([f"Your key is {KEY[:12]}", KEY[12:25], KEY[25:] + " and done."])
    assert marked == {0: (12, 24), 1: (0, 13), 2: (0, len(KEY) - 25)}


async def test_a_streamed_answers_split_key_is_not_in_the_log(tmp_path: Path, edge) -> None:
    edge.reply = Reply.event_stream(
        _chat_events(["Here: ", KEY[:10], KEY[10:22], KEY[22:], " done"])
    )
    settings = proxy_settings(edge.base_url, store={"capture_payloads": True})
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=request(user("hi"), stream=True))
        assert r.status_code == 200 and KEY[10:22] in r.text  # the client gets it all
        (row,) = await log_rows(client)
    kept = row["response_body"]
    assert "Here: " in kept and " done" in kept
    for part in (KEY[:10], KEY[10:22], KEY[22:]):
        assert part not in kept


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_large_captured_answer_is_redacted_off_the_event_loop(
    tmp_path: Path, edge, monkeypatch, stream: bool
) -> None:
    """A 60 KB answer dense in secret names took over a second to redact, on the event loop."""
    threads: list[str] = []

    def recording(body: bytes, total: int | None) -> str:
        threads.append(threading.current_thread().name)
        return captured_text(body, total)

    monkeypatch.setattr(log_fields, "captured_text", recording)
    content = "Key" * 20_000
    if stream:
        edge.reply = Reply.event_stream(_chat_events([content]))
    else:
        answer = {"id": "c1", "choices": [{"index": 0, "message": {"content": content}}]}
        edge.reply = Reply.json(answer)
    settings = proxy_settings(edge.base_url, store={"capture_payloads": True})
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=request(user("hi"), stream=stream))
        assert r.status_code == 200
        (row,) = await log_rows(client)
    assert row["response_body"] and content[:300] in row["response_body"]
    assert threads and threading.main_thread().name not in threads
    assert all(name.startswith("ctxproxy-body") for name in threads)


def test_a_secret_the_capture_bound_cuts_is_not_kept_in_part(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An answer past the capture's bound is cut there; cut before it was redacted, a URL's
    password the cut split kept its beginning (no ``@`` after it: no URL's password)."""
    monkeypatch.setattr(log_fields, "CAPTURE_MAX_BYTES", 200)
    head = "x" * 170 + " postgres://admin:"
    body = (head + "S3cretPassw0rd@db.internal:5432/app and more text after it").encode()
    out = captured_text(body)
    assert "S3cr" not in out
    assert out.startswith("x" * 170) and "more bytes not captured" in out
