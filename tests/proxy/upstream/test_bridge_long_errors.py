"""A provider's error quoting megabytes of the request back, on a route bridged by litellm: the
client's message is read from the part shown (the proxy redacted the whole of it first: seconds
of the event loop for 3 MB), and litellm's own redaction of its log payloads, on the whole text,
is off: its records go through the proxy's redaction, cut (``proxy.litellm_logs``)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from proxy.litellm_logs import LOGGERS, MAX_RECORD_CHARS
from proxy.providers import load_litellm
from tests.conftest import in_process, proxy_settings
from tests.proxy.upstream.test_bridge_stream_open import GEMINI, KEY, fresh_clients  # noqa: F401
from tests.support.edge_upstream import EdgeUpstream, Reply

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"  # litellm on httpx, as the other bridge tests
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)
GITHUB = "ghp_Aa1Bb2Cc3DAa1Bb2Cc3DAa1Bb2Cc3DChK5Um"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_quoted_3_mb_error_is_answered_quickly(
    tmp_path: Path, edge: EdgeUpstream, stream: bool
) -> None:
    quoted = "Invalid input: token " + GITHUB + " " + "aws_secret_access_key password " * 100_000
    error = {"error": {"code": 400, "message": quoted, "status": "INVALID_ARGUMENT"}}
    edge.reply = Reply.json(error, 400)
    upstream = {**GEMINI, "base_url": edge.url, "timeout_s": 60}
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    body = {"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": "hi"}]}
    async with in_process(settings, str(tmp_path / "db")) as c:
        await c.post("/v1/chat/completions", json=body, headers={"authorization": "Bearer x"})
        started = time.thread_time()  # litellm warmed up: this request's own work
        r = await c.post(
            "/v1/chat/completions",
            json={**body, "stream": stream},
            headers={"authorization": f"Bearer {KEY}"},
        )
        spent = time.thread_time() - started
    assert r.status_code == 400, r.text
    assert "Invalid input: token" in r.text and GITHUB not in r.text
    assert len(r.content) < 2_000
    assert spent < 2.0, spent  # 8.6–14.9 s of CPU before


def test_litellms_records_are_redacted_cut_and_quiet(caplog: pytest.LogCaptureFixture) -> None:
    load_litellm()
    assert os.environ.get("LITELLM_DISABLE_REDACT_SECRETS") == "true"
    logger = logging.getLogger(LOGGERS[0])
    if not os.environ.get("LITELLM_LOG"):
        assert logger.level == logging.CRITICAL  # the proxy logs each failure itself
    with caplog.at_level(logging.DEBUG, logger=LOGGERS[0]):
        logger.critical(
            "mid-stream error: %s %s", GITHUB, "x" * 50_000, exc_info=(None, None, None)
        )
    record = caplog.records[-1]
    assert GITHUB not in record.getMessage() and "[REDACTED]" in record.getMessage()
    assert len(record.getMessage()) <= MAX_RECORD_CHARS
    assert record.exc_info is None
