"""A model name refused before a provider's URL is built from it (``safe_in_url``) is told to
the client and written to the server's log and the request's row: redacted there, and redacted
before it is cut. A Gemini key pasted with its REST URL's query (``…:generateContent?key=AIza…``)
does not rest on stderr, nor does the part a cut would leave of a key past the cut."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from tests.conftest import in_process, log_rows, proxy_settings
from tests.proxy.upstream.test_bridge_stream_open import KEY
from tests.support.edge_upstream import EdgeUpstream, Reply

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"  # litellm on httpx, as the other bridge tests
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)
GOOGLE = "AIzaSyB3x9Q2w8E7r6T5y4U3i2O1p0AsDfGhJkL"
GITHUB = "ghp_R4nD0mT0k3nV4lu3F0rT3st1ngAbCdEf1234"


@pytest.mark.parametrize(
    ("model", "gone"),
    [
        (f"gemini-2.5-pro:generateContent?key={GOOGLE}", GOOGLE),
        # the cut at 100 characters leaves 13 of the token's 36 characters: no token's shape
        ("gemini-x?q=" + "a" * 70 + f"&{GITHUB}", GITHUB[:14]),
    ],
)
async def test_a_refused_model_name_is_logged_redacted(
    tmp_path: Path,
    edge: EdgeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    model: str,
    gone: str,
) -> None:
    edge.reply = Reply.json({"candidates": []})
    upstream = {"name": "gem", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url,
                "api_key_env": "CTXPROXY_TEST_GEMINI_KEY"}  # fmt: skip
    monkeypatch.setenv("CTXPROXY_TEST_GEMINI_KEY", KEY)
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    caplog.set_level(logging.WARNING, logger="ctxproxy")
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(
            "/v1/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
            headers={"x-api-key": KEY},
        )
        rows = await log_rows(c)
    assert r.status_code == 400, r.text
    assert "not a model name" in r.text
    assert edge.seen == []
    assert "model name refused" in caplog.text  # the line was written
    assert gone not in caplog.text
    assert [row["error"] for row in rows if gone in (row.get("error") or "")] == []


async def test_an_unserved_model_is_redacted_before_its_cut_in_a_token_count(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    """``/v1/messages/count_tokens`` names an unserved model in its error cut to 100 characters:
    the row keeps that error redacted, and a token past the cut kept 13 of its 36 characters."""
    upstream = {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url}
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    model = "gpt-x?q=" + "a" * 74 + f"&{GITHUB}"
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(
            "/v1/messages/count_tokens",
            json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
            headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
        )
        rows = await log_rows(c)
    assert r.status_code == 404, r.text
    assert edge.seen == []
    errors = [row.get("error") or "" for row in rows]
    assert any("is not served" in e for e in errors), errors
    assert [e for e in errors if GITHUB[:14] in e] == []
