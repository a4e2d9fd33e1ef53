"""``limits.stream_max_s`` holds for the relayed calls that are no model request too (embeddings,
moderations, Anthropic's and Gemini's token counts): an upstream (or a gateway before it) that
drips its answer a few bytes at a time never trips the per-read timeout, and held the client's
request, its slot in flight and an upstream connection for as long as it dripped. Past the bound
an answer whose head is still awaited or read whole is a 504 ``stream_max_exceeded`` in the
path's protocol; one streaming through is cut (its connection closed), its row saying why."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.app import create_app
from tests.proxy.upstream.test_stream_deadline import settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.live import serve_in_thread, stop
from tests.support.request_rows import completed_row

BOUND_S = 0.6
DRIP_S = 0.1
CHAT = {"role": "user", "content": "hi"}
GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
# the relayed call: its path and a body it takes
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "embeddings": ("/v1/embeddings", {"model": "m", "input": "x"}),
    "moderations": ("/v1/moderations", {"model": "m", "input": "x"}),
    "anthropic count": (
        "/v1/messages/count_tokens",
        {"model": "claude-x", "messages": [CHAT]},
    ),
    "gemini count": ("/v1beta/models/gemini-x:countTokens", GEMINI),
}
HEADERS = {"authorization": "Bearer k", "x-api-key": "k", "x-goog-api-key": "k"}


def _dripped() -> Reply:
    """A JSON answer that keeps coming, a space every ``DRIP_S``, for 20 s."""
    chunks = [b'{"object": "list",'] + [b" "] * int(20 / DRIP_S) + [b'"data": []}']
    return Reply(headers=[("content-type", "application/json")], chunks=chunks,
                 chunk_delay_s=DRIP_S)  # fmt: skip


def _call(
    edge: EdgeUpstream, tmp_path: Path, call: str, bound_s: float = BOUND_S
) -> tuple[int, bytes, Any, float]:
    """The call through a live proxy: the answer's status and what of its body arrived (an
    answer cut mid-body ends the connection), its log row, how long it took."""
    path, body = CALLS[call]
    db = tmp_path / "db"
    server, url = serve_in_thread(create_app(settings(edge, bound_s), db_path=str(db),
                                             strict=True))  # fmt: skip
    try:
        started = time.monotonic()
        got = bytearray()
        with httpx.stream("POST", url + path, json=body, headers=HEADERS, timeout=30) as r:
            request_id = r.headers["x-ctxproxy-request-id"]
            with contextlib.suppress(httpx.HTTPError):  # a cut body
                for piece in r.iter_raw():
                    got += piece
        took = time.monotonic() - started
        return r.status_code, bytes(got), completed_row(db, request_id), took
    finally:
        stop(server)


@pytest.mark.parametrize("call", CALLS)
def test_an_answer_dripped_past_the_bound_is_cut(
    tmp_path: Path, edge: EdgeUpstream, call: str
) -> None:
    edge.reply = _dripped()
    status, text, row, took = _call(edge, tmp_path, call)
    assert took < 5, took  # not the drip's 20 s
    assert row["error_type"] == "stream_max_exceeded", row
    assert "stream_max_s" in row["error"]
    if call in ("embeddings", "moderations"):  # streamed through: its head went, then the cut
        assert status == 200 and row["status"] == 200
        assert not text.endswith(b"}")  # cut, never taken for a whole answer
    else:  # read whole before it is answered: the protocol's 504
        assert status == 504 and row["status"] == 504
        assert b"stream_max_s" in text


@pytest.mark.parametrize("call", CALLS)
def test_a_head_awaited_past_the_bound_is_a_504(
    tmp_path: Path, edge: EdgeUpstream, call: str
) -> None:
    edge.reply = dataclasses.replace(Reply.json({"object": "list", "data": []}),
                                     header_delay_s=20.0)  # fmt: skip
    status, text, row, took = _call(edge, tmp_path, call)
    assert took < 5, took
    assert status == 504 and row["status"] == 504
    assert row["error_type"] == "stream_max_exceeded"
    assert b"stream_max_s" in text


def test_the_heads_wait_counts_toward_the_bound(tmp_path: Path, edge: EdgeUpstream) -> None:
    # a head at 1.5 s of a 2 s bound leaves the drip 0.5 s, not the bound again (3.5 s)
    edge.reply = dataclasses.replace(_dripped(), header_delay_s=1.5)
    status, _, row, took = _call(edge, tmp_path, "embeddings", bound_s=2.0)
    assert status == 200 and row["error_type"] == "stream_max_exceeded"
    assert took < 3.0, took


def test_an_answer_within_the_bound_is_whole(tmp_path: Path, edge: EdgeUpstream) -> None:
    edge.reply = Reply.json({"object": "list", "data": [], "usage": {"prompt_tokens": 2}})
    status, text, row, _ = _call(edge, tmp_path, "embeddings")
    assert status == 200 and orjson.loads(text)["usage"] == {"prompt_tokens": 2}
    assert row["error_type"] is None and row["prompt_tokens"] == 2
