"""Structured logs: one JSON line per request on stderr; level configurable; no bodies, no keys."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.app import create_app
from proxy.telemetry import jsonlog
from tests.conftest import proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import request, system, user

SECRET_TEXT = "TOP-SECRET-PROMPT-TEXT"
CLIENT_KEY = "sk-client-key-abcdef123456"


@contextlib.asynccontextmanager
async def app_with_log(
    tmp_path: Path, upstream: EdgeUpstream, **overrides: Any
) -> AsyncIterator[tuple[Any, io.StringIO]]:
    stream = io.StringIO()
    app = create_app(
        proxy_settings(upstream.base_url, **overrides), db_path=str(tmp_path / "db"), strict=True
    )
    app.state.log_stream = stream
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            client.app = app  # type: ignore[attr-defined]
            yield client, stream


@pytest.fixture
def upstream() -> Iterator[EdgeUpstream]:
    server = EdgeUpstream().start()
    server.reply = Reply.json(
        {
            "id": "c1",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"echo {SECRET_TEXT}"},
                }
            ],
            "usage": {
                "prompt_tokens": 30,
                "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": 16},
            },
        }
    )
    yield server
    server.stop()


async def send(client: httpx.AsyncClient, body: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    return await client.post(
        "/v1/chat/completions",
        content=content,
        headers={
            "content-type": "application/json",
            "authorization": f"Bearer {CLIENT_KEY}",
            "x-session-id": "log-sess",
        },
    )


async def test_one_json_line_per_request_without_bodies_or_keys(tmp_path, upstream) -> None:
    async with app_with_log(tmp_path, upstream) as (client, stream):
        ok = await send(client, request(system(), user(f"please {SECRET_TEXT}")))
        bad = await send(client, b'{"model": "gpt-4o"}')
        store = client.app.state.services.store  # type: ignore[attr-defined]
        await store.flush()
        logged = await store.get_request(ok.headers["x-ctxproxy-request-id"])
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (orjson.loads(x) for x in lines)
    assert first["request_id"] == ok.headers["x-ctxproxy-request-id"]
    assert first["event"] == "request" and first["level"] == "INFO"
    assert first["session"].startswith("pt-") and first["session"].endswith("/log-sess")
    assert first["model"] == "gpt-4o"
    assert first["status"] == 200 and first["upstream"] == "fake"
    assert first["tokens_before"] > 0
    assert (first["tokens_before"], first["tokens_after"]) == (
        logged["tokens_before"],
        logged["tokens_after"],
    )
    assert first["prompt_tokens"] == 30 and first["cached_tokens"] == 16
    assert first["overhead_ms"] >= 0 and first["latency_ms"] >= first["overhead_ms"]
    assert first["repairs"] == 0 and first["pruned"] == 0
    assert second["request_id"] == bad.headers["x-ctxproxy-request-id"]
    assert second["status"] == 400 and second["level"] == "WARNING"
    assert second["error_type"] == "invalid_request"
    text = stream.getvalue()
    assert SECRET_TEXT not in text and CLIENT_KEY not in text and "messages" not in text


@pytest.mark.parametrize(
    ("level", "statuses"),
    [
        ("DEBUG", [200, 400, 500]),
        ("INFO", [200, 400, 500]),
        ("WARNING", [400, 500]),
        ("ERROR", [500]),
    ],
)
async def test_level_is_configurable(tmp_path, upstream, level, statuses) -> None:
    async with app_with_log(tmp_path, upstream, logging={"level": level}) as (client, stream):
        await send(client, request(user("a")))
        await send(client, b"{broken")
        upstream.reply = Reply.json({"error": {"message": "boom"}}, 500)
        await send(client, request(user("b")))
    logged = [orjson.loads(x) for x in stream.getvalue().splitlines()]
    assert [x["status"] for x in logged] == statuses
    levels = {200: "INFO", 400: "WARNING", 500: "ERROR"}
    assert [x["level"] for x in logged] == [levels[s] for s in statuses]
    assert "boom" not in stream.getvalue()  # upstream error bodies stay in the store


async def test_plain_text_lines_when_json_is_off(tmp_path, upstream) -> None:
    async with app_with_log(tmp_path, upstream, logging={"json_lines": False}) as (client, stream):
        r = await send(client, request(user("a")))
    (line,) = stream.getvalue().splitlines()
    assert line.startswith("ts=") and f"request_id={r.headers['x-ctxproxy-request-id']}" in line
    assert " status=200 " in line


def test_live_proxy_logs_to_stderr(live_proxy, capsys) -> None:
    proxy = live_proxy()
    r = httpx.post(proxy.base_url + "/chat/completions", json=request(user("hello")))
    proxy.row(r.headers["x-ctxproxy-request-id"])
    err = capsys.readouterr().err
    records = [orjson.loads(x) for x in err.splitlines() if x.startswith("{")]
    assert [x["request_id"] for x in records] == [r.headers["x-ctxproxy-request-id"]]


@pytest.mark.parametrize(("json_lines", "level"), [(True, "INFO"), (False, "WARNING")])
def test_configure_sends_the_proxy_loggers_to_stderr(capsys, json_lines, level) -> None:
    import logging

    from proxy.settings import LoggingSettings
    from proxy.telemetry.jsonlog import configure

    logger = logging.getLogger("ctxproxy")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    try:
        configure(LoggingSettings(level=level, json_lines=json_lines))
        child = logging.getLogger("ctxproxy.observe")
        child.info("quiet unless INFO")
        try:
            raise ValueError("boom")
        except ValueError:
            child.exception("observer failed")
        lines = capsys.readouterr().err.splitlines()
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved
    if json_lines:
        records = [orjson.loads(x) for x in lines if x.startswith("{")]
        assert [r["message"] for r in records] == ["quiet unless INFO", "observer failed"]
        assert records[1]["level"] == "ERROR" and "ValueError: boom" in records[1]["exc"]
        assert records[1]["logger"] == "ctxproxy.observe"
    else:
        assert lines[0] == "observer failed" and "quiet unless INFO" not in lines


def test_the_proxys_own_text_lines_escape_a_clients_line_breaks_and_escapes(capsys) -> None:
    """A message may quote a client's text (a session name, a provider's error quoting the
    request): in text mode too it stays one line, with nothing a terminal acts on."""
    import logging

    from proxy.settings import LoggingSettings
    from proxy.telemetry.jsonlog import configure

    logger = logging.getLogger("ctxproxy")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    session = "s\nERROR store: PostgreSQL is unreachable\x1b[2J\x9b31m\u202eevil\r\x7f"
    try:
        configure(LoggingSettings(level="INFO", json_lines=False))
        logging.getLogger("ctxproxy.store").warning("store: session %s held too long", session)
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("ctxproxy.handler").exception("request %s failed", "a\nb")
        err = capsys.readouterr().err
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved
    lines = err.splitlines()
    assert lines[0] == (
        "store: session s\\u000aERROR store: PostgreSQL is unreachable\\u001b[2J\\u009b31m"
        "\\u202eevil\\u000d\\u007f held too long"
    )
    assert lines[1] == "request a\\u000ab failed" and "ValueError: boom" in err
    for raw in ("\x1b", "\x9b", "\u202e", "\r", "\x7f"):
        assert raw not in err


@pytest.mark.parametrize(
    "session",
    [
        "s\nts=x level=ERROR event=request request_id=req_forged status=500",
        "s request_id=req_forged status=500",
        's" request_id=req_forged status="500',
        "s\rrequest_id=req_forged",
        "s\u2028request_id=req_forged",
        "s\x85request_id=req_forged",
        "张三 status=500",
        "",
    ],
)
def test_plain_text_values_are_quoted_so_no_line_can_be_forged(session: str) -> None:
    import shlex

    from proxy.settings import LoggingSettings
    from proxy.telemetry.jsonlog import JsonLog

    stream = io.StringIO()
    row = {"id": "req_real", "session_id": session, "status": 200, "model": "m x"}
    JsonLog(LoggingSettings(json_lines=False), stream).finished(row)
    (line,) = stream.getvalue().splitlines()
    fields = dict(token.split("=", 1) for token in shlex.split(line))
    assert fields["request_id"] == "req_real" and fields["status"] == "200"
    assert fields["model"] == "m x"
    assert fields["session"].startswith(session[:1])
    assert not any(c in fields["session"] for c in "\n\r\u2028\x85")


@pytest.mark.parametrize("json_lines", [True, False])
def test_terminal_control_characters_from_clients_are_escaped(json_lines: bool) -> None:
    """orjson escapes C0 controls, but DEL, C1 (``\\x9b`` is CSI) and bidi overrides would reach
    the terminal of whoever tails stderr raw: they are written as \\u escapes."""
    from proxy.settings import LoggingSettings
    from proxy.telemetry.jsonlog import JsonLog

    out = io.StringIO()
    log = JsonLog(LoggingSettings(json_lines=json_lines), stream=out)
    model = "gpt\x1b[31m\x9b2J\u202eevil\u2066x\x7f"
    log.finished({"id": "r1", "status": 200, "model": model, "session_id": "s\u202e1"})
    line = out.getvalue()
    for raw in ("\x1b", "\x9b", "\u202e", "\u2066", "\x7f"):
        assert raw not in line
    assert "\\u202e" in line and "\\u009b" in line
    if json_lines:
        assert orjson.loads(line)["model"] == model  # the same JSON, only escaped


@settings(max_examples=3000, deadline=None)
@given(
    st.one_of(
        st.floats(min_value=-4e9, max_value=4e9, allow_nan=False),
        st.sampled_from([-1.0, -1.0000004, -0.5, 0.0]),  # before 1970, and the second -1 itself
        # the half-microsecond boundaries, where the rounding to microseconds decides the digits
        st.integers(min_value=0, max_value=4 * 10**15).map(lambda us: us / 1e6 + 5e-7),
        st.integers(min_value=0, max_value=4 * 10**9).map(lambda s: s + 0.9999995),
    )
)
def test_line_times_are_what_datetime_writes(now: float) -> None:
    """The log line's time, its second's text kept: ``datetime``'s, digit for digit."""
    seconds = jsonlog._Seconds()
    want = dt.datetime.fromtimestamp(now, dt.UTC).isoformat(timespec="milliseconds")
    assert seconds.iso(now) == want
    assert seconds.iso(now) == want  # the second's text kept
    later = now + 0.25
    assert seconds.iso(later) == dt.datetime.fromtimestamp(later, dt.UTC).isoformat(
        timespec="milliseconds"
    )


async def test_a_stream_the_upstream_broke_off_is_a_warning(tmp_path, upstream) -> None:
    """Its status line said 200 before the upstream broke off; the answer failed (the client got
    an error event): logged at INFO, it went unseen under `logging.level: WARNING`."""
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o",
             "choices": [{"index": 0, "delta": {"content": "Hel"}}]}  # fmt: skip
    upstream.reply = Reply(
        headers=[("content-type", "text/event-stream")],
        chunks=[b"data: " + orjson.dumps(chunk) + b"\n\n", b"never sent"],
        after_first_chunk="break",
    )
    async with app_with_log(tmp_path, upstream, logging={"level": "WARNING"}) as (client, stream):
        r = await send(client, {**request(user("a")), "stream": True})
    assert r.status_code == 200 and b'"error"' in r.content
    (logged,) = [orjson.loads(x) for x in stream.getvalue().splitlines()]
    assert logged["status"] == 200 and logged["level"] == "WARNING"
    assert logged["error_type"]


@pytest.mark.parametrize("json_lines", [True, False])
def test_the_proxys_own_lines_are_redacted(capsys, json_lines: bool) -> None:
    """A record's call site may quote a client's text (a model name refused, a path, an
    exception's message holding part of a request): the line on stderr holds no key."""
    import logging

    from proxy.settings import LoggingSettings
    from proxy.telemetry.jsonlog import configure

    key = "sk-proj-Hv7Tq2LmR9xKp4WzN8cBf3YdJ6sG1aE0uIoPlMnB"
    logger = logging.getLogger("ctxproxy")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    try:
        configure(LoggingSettings(level="INFO", json_lines=json_lines))
        logging.getLogger("ctxproxy.upstream").warning("model name refused: %r", f"x?key={key}")
        try:
            raise ValueError(f"cannot read {{'api_key': '{key}'}}")
        except ValueError:
            logging.getLogger("ctxproxy.handler").exception("request %s failed", "r1")
        err = capsys.readouterr().err
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved
    assert "model name refused" in err and "ValueError: cannot read" in err
    assert key[:12] not in err
