"""Token counts are requests too: ``POST /v1/messages/count_tokens`` (the real ``anthropic`` SDK,
as Claude Code counts) and Gemini's ``:countTokens``, through a live proxy, each have their log
row, their JSON log line and their ``/metrics`` samples, whether the count is the upstream's or
made here, answered or refused. Every answer carries its row's id."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import pytest

from proxy.app import create_app
from tests.conftest import proxy_settings
from tests.proxy.telemetry.test_metrics import samples, value
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.live import serve_in_thread, stop
from tests.support.request_rows import completed_row

KEY = "sk-ant-client-key-0000000000000001"
MESSAGES = [{"role": "user", "content": "how many tokens is this"}]
GEMINI_HEADERS = {"content-type": "application/json", "x-goog-api-key": "AIzaSyClient000000000000"}
GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "count me"}]}]}


@pytest.fixture
def proxy(tmp_path: Path, edge: EdgeUpstream) -> Iterator[Callable[[], str]]:
    servers = []

    def start() -> str:
        settings = proxy_settings(
            edge.base_url,
            upstreams=[
                {"name": "claude", "kind": "anthropic", "match": ["claude-*"],
                 "base_url": edge.base_url.removesuffix("/v1")},
                {"name": "gemini", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url},
                {"name": "other", "match": ["*"], "base_url": edge.base_url},
            ],
        )  # fmt: skip
        server, url = serve_in_thread(create_app(settings, db_path=str(tmp_path / "p.db")))
        servers.append(server)
        return url

    yield start
    for server in servers:
        stop(server)


def _client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)


def _lines(err: str, request_id: str) -> list[dict[str, Any]]:
    lines = [orjson.loads(line) for line in err.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("request_id") == request_id]


def test_a_count_the_upstream_makes_has_its_row(
    proxy, edge: EdgeUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edge.reply = Reply.json({"input_tokens": 17})
    url = proxy()
    answer = _client(url).messages.with_raw_response.count_tokens(
        model="claude-opus-5-5", messages=MESSAGES
    )
    assert answer.parse().input_tokens == 17
    assert edge.last.target.startswith("/v1/messages/count_tokens")
    request_id = answer.headers["x-ctxproxy-request-id"]
    row = completed_row(tmp_path / "p.db", request_id)
    assert (row["path"], row["protocol"]) == ("/v1/messages/count_tokens", "count_tokens")
    assert (row["model"], row["upstream"], row["status"]) == ("claude-opus-5-5", "claude", 200)
    assert row["principal"] not in ("-", "legacy") and row["session_id"] is None
    assert row["ttfb_ms"] is not None and 0 <= row["overhead_ms"] <= row["latency_ms"]
    # a count bills nothing: no usage, no tokens in the totals
    assert row["usage"] is None and row["prompt_tokens"] is None
    m = samples(httpx.get(url + "/metrics").text)
    assert value(m, "ctxproxy_requests_total", status="200", model="claude-opus-5-5") == 1
    assert value(m, "ctxproxy_in_flight_requests") == 0
    (line,) = _lines(capsys.readouterr().err, request_id)
    assert (line["status"], line["model"], line["upstream"]) == (200, "claude-opus-5-5", "claude")


def test_a_count_made_here_has_its_row(proxy, edge: EdgeUpstream, tmp_path: Path) -> None:
    url = proxy()
    answer = _client(url).messages.with_raw_response.count_tokens(model="gpt-4o", messages=MESSAGES)
    assert answer.parse().input_tokens > 3
    assert edge.seen == []  # no Anthropic upstream serves it: counted here
    row = completed_row(tmp_path / "p.db", answer.headers["x-ctxproxy-request-id"])
    assert (row["protocol"], row["model"], row["status"]) == ("count_tokens", "gpt-4o", 200)
    assert row["upstream"] is None and row["ttfb_ms"] is None


def test_a_refused_count_is_logged(proxy, edge: EdgeUpstream, tmp_path: Path) -> None:
    """Bad input: Anthropic's error shape, the right status, the row saying why."""
    url = proxy()
    with pytest.raises(anthropic.BadRequestError) as raised:
        _client(url).messages.count_tokens(model="claude-opus-5-5", messages=[])
    response = raised.value.response
    assert response.json()["type"] == "error"
    row = completed_row(tmp_path / "p.db", response.headers["x-ctxproxy-request-id"])
    assert (row["status"], row["protocol"], row["upstream"]) == (400, "count_tokens", None)
    assert row["error_type"] and row["error"]
    assert edge.seen == []
    m = samples(httpx.get(url + "/metrics").text)  # refused before its model was read
    assert value(m, "ctxproxy_requests_total", status="400", model="none") == 1


def test_an_upstream_error_is_logged_redacted(proxy, edge: EdgeUpstream, tmp_path: Path) -> None:
    error = {"type": "error", "error": {"type": "authentication_error",
                                        "message": f"invalid x-api-key {KEY}"}}  # fmt: skip
    edge.reply = Reply.json(error, 401)
    url = proxy()
    with pytest.raises(anthropic.AuthenticationError) as raised:
        _client(url).messages.count_tokens(model="claude-opus-5-5", messages=MESSAGES)
    row = completed_row(tmp_path / "p.db", raised.value.response.headers["x-ctxproxy-request-id"])
    assert (row["status"], row["upstream"]) == (401, "claude")
    assert "invalid x-api-key" in row["error"] and KEY not in row["error"]


def test_geminis_counts_have_their_rows(proxy, edge: EdgeUpstream, tmp_path: Path) -> None:
    edge.reply = Reply.json({"totalTokens": 9})
    url = proxy()
    ids = {}
    for model in ("gemini-2.5-flash", "gpt-4o"):  # the upstream's count, and one made here
        answer = httpx.post(
            f"{url}/v1beta/models/{model}:countTokens", json=GEMINI_BODY, headers=GEMINI_HEADERS
        )
        assert answer.status_code == 200, answer.text
        ids[model] = answer.headers["x-ctxproxy-request-id"]
    bad = httpx.post(
        f"{url}/v1beta/models/gpt-4o:countTokens", content=b"[]", headers=GEMINI_HEADERS
    )
    assert bad.status_code == 400 and bad.json()["error"]["status"] == "INVALID_ARGUMENT"
    native = completed_row(tmp_path / "p.db", ids["gemini-2.5-flash"])
    assert (native["path"], native["protocol"]) == (
        "/v1beta/models/gemini-2.5-flash:countTokens",
        "count_tokens",
    )
    assert (native["model"], native["upstream"], native["status"]) == (
        "gemini-2.5-flash",
        "gemini",
        200,
    )
    here = completed_row(tmp_path / "p.db", ids["gpt-4o"])
    assert (here["model"], here["upstream"], here["status"]) == ("gpt-4o", None, 200)
    refused = completed_row(tmp_path / "p.db", bad.headers["x-ctxproxy-request-id"])
    assert (refused["status"], refused["model"]) == (400, "gpt-4o")
    assert refused["principal"] == native["principal"] != "-"
