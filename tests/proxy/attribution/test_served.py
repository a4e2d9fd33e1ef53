"""The cache line through a live proxy: the real OpenAI SDK, whole and streamed, in front of the
scripted upstream answering with fake usage. Each request's line is stored with its row; the
client's own change of the system prompt is named; ``/metrics`` counts the re-billed tokens by
cause; ``show`` prints the line and ``logs --cost`` the session's cost against direct."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import httpx
import openai
import pytest

from proxy.telemetry.jsonlog import request_record
from tests.proxy.telemetry.test_metrics import samples, value

SYSTEM = "You are a careful coding agent. " * 60


def usage(prompt: int, cached: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": 3,
        "total_tokens": prompt + 3,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def ask(proxy: Any, system: str, turns: list[str], stream: bool) -> str:
    client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    messages: list[Any] = [{"role": "system", "content": system}]
    for i, text in enumerate(turns):
        if i:
            messages.append({"role": "assistant", "content": f"done {i}"})
        messages.append({"role": "user", "content": text})
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o",
        messages=messages,
        stream=stream,
        stream_options={"include_usage": True} if stream else openai.NOT_GIVEN,
        extra_headers={"x-session-id": "cost-1"},
    )
    if stream:
        for _ in raw.parse():
            pass
    return str(raw.headers["x-ctxproxy-request-id"])


def ctxproxy(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "proxy.cli", *args],
        capture_output=True,
        check=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "400"},  # rich wraps at the terminal's width
    )
    return done.stdout.decode()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_cache_lines_are_stored_counted_and_shown(live_proxy, fake_upstream, stream: bool) -> None:
    proxy = live_proxy()
    fake_upstream.script.usage = usage(1300, 0)
    first = proxy.row(ask(proxy, SYSTEM, ["fix calc.py"], stream))
    fake_upstream.script.usage = usage(1400, 1280)
    hit = proxy.row(ask(proxy, SYSTEM, ["fix calc.py", "and the tests"], stream))
    fake_upstream.script.usage = usage(1500, 0)
    turns = ["fix calc.py", "and the tests", "now the docs"]
    busted = proxy.row(ask(proxy, "Be terse. " + SYSTEM, turns, stream))

    assert first["cache"]["outcome"] == "first"
    assert (hit["cache"]["outcome"], hit["cache"]["cached"]) == ("hit", 1280)
    line = busted["cache"]
    assert (line["outcome"], line["cause"], line["where"]) == ("miss", "client", "system")
    assert line["rebilled"] == 1400  # the previous prompt, read back none
    assert line["usd"] > 0 and line["direct_usd"] > 0  # gpt-4o's price, from litellm's table

    record = request_record(busted, 0.0)  # the structured log line of the request
    assert (record["cache"], record["cache_cause"], record["rebilled_tokens"]) == (
        "miss", "client", 1400,
    )  # fmt: skip
    m = samples(httpx.get(proxy.url + "/metrics").text)
    assert value(m, "ctxproxy_cache_rebilled_tokens_total", cause="client") == 1400
    assert value(m, "ctxproxy_cache_busts_total", cause="client") == 1
    assert value(m, "ctxproxy_cache_busts_total", cause="expiry") == 0

    shown = ctxproxy("show", busted["id"], "--db", proxy.db_path)
    assert "Cache: miss: none of 1500 prompt tokens" in shown
    assert "cause: the client's own change (system); re-billed 1400 tokens ($" in shown
    costs = ctxproxy("logs", "--cost", "--db", proxy.db_path)
    [session_line] = costs.splitlines()
    assert session_line.startswith(f"{busted['session_id']}  input $")
    assert "direct" in session_line and "at gpt-4o's prices over 3 requests" in session_line
    assert "cache busts: client 1;" in session_line
    import orjson

    (record_line,) = ctxproxy("logs", "--cost", "--json", "--db", proxy.db_path).splitlines()
    costed = orjson.loads(record_line)  # --json was ignored: the text line came out
    assert costed["session"] == busted["session_id"] and costed["requests"] == 3
    assert costed["busts"] == {"client": 1} and costed["rebilled_tokens"]["client"] == 1400
