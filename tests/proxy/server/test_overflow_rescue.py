"""Upstream overflow rescue, end to end: the real ``openai`` SDK → a live proxy → a scripted
upstream on loopback that first answers "the prompt is too long" (stating the model's window),
then answers the retry. The client gets the retry's 200; the retry is smaller and fits the window
learned from the error; the row and /metrics record the rescue. A request whose protected floor
cannot fit gets the upstream's own 400, in OpenAI's shape, after a single upstream call."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from proxy.app import create_app
from proxy.tokens import TokenCounters
from tests.conftest import LiveProxy, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply, sse
from tests.support.factories import anthropic_message, chat_completion
from tests.support.live import serve_in_thread, stop

MODEL = "gpt-4o"
WINDOW = 4000
# The model's window as configured: a learned window never goes below half of it (the floor), so
# the stated WINDOW is learned as it is
KNOWN = 2 * WINDOW
RESERVE = 100  # pipeline.output_reserve_tokens


def conversation(turns: int = 10) -> list[dict[str, Any]]:
    """A coding session: a task, then ``turns`` file reads of ~300 tokens each."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Read the modules and tell me what the package does."},
    ]
    for i in range(turns):
        call_id = f"call_{i}"
        arguments = orjson.dumps({"command": f"cat src/module_{i}.py"}).decode()
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "bash", "arguments": arguments},
                    }
                ],
            }
        )
        body = "\n".join(f"def function_{i}_{j}(value):\n    return value * {j}" for j in range(40))
        messages.append({"role": "tool", "tool_call_id": call_id, "content": body})
    messages.append({"role": "user", "content": "Now summarise."})
    return messages


def count(messages: list[dict[str, Any]]) -> int:
    return TokenCounters().for_model(MODEL).count_messages(messages)


def openai_overflow(prompt: int) -> Reply:
    message = (
        f"This model's maximum context length is {WINDOW} tokens. However, your messages "
        f"resulted in {prompt} tokens. Please reduce the length of the messages."
    )
    error = {"message": message, "type": "invalid_request_error", "param": "messages"}
    return Reply.json({"error": {**error, "code": "context_length_exceeded"}}, status=400)


def settings_for(edge: EdgeUpstream, **extra: Any) -> Any:
    pipeline = {
        "on_rule_error": "fail",
        "output_reserve_tokens": RESERVE,
        "context_windows": {MODEL: KNOWN},
    }
    return proxy_settings(edge.base_url, pipeline=pipeline, **extra)


def client_for(proxy: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)


def metric(proxy: Any, outcome: str) -> float:
    text = httpx.get(proxy.url + "/metrics").text
    line = f'ctxproxy_overflow_rescues_total{{outcome="{outcome}"}}'
    found = [row for row in text.splitlines() if row.startswith(line)]
    return float(found[0].split()[-1]) if found else 0.0


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_overflow_is_compacted_and_retried(live_proxy, edge: EdgeUpstream, stream: bool) -> None:
    messages = conversation()
    sent = count(messages)
    assert WINDOW < sent < KNOWN - RESERVE  # the proxy's own budget lets it through at first
    answer = (
        Reply.event_stream(b"".join(sse(_chunk("fitted"), _chunk(None, "stop"))))
        if stream
        else Reply.json(chat_completion("fitted"))
    )
    edge.replies = [openai_overflow(int(sent * 1.05)), answer]
    proxy = live_proxy(settings_for(edge))
    raw = client_for(proxy).chat.completions.with_raw_response.create(
        model=MODEL, messages=messages, stream=stream
    )
    if stream:
        text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    else:
        text = raw.parse().choices[0].message.content or ""
    assert raw.http_response.status_code == 200 and text == "fitted"
    assert len(edge.seen) == 2
    first, retry = (seen.json()["messages"] for seen in edge.seen)
    assert first[:-1] == messages[:-1]  # forwarded whole the first time (inject's tail aside)
    assert count(retry) < count(first)
    row = proxy.row(raw.headers["x-ctxproxy-request-id"])
    rescue = row["report"]["rescue"]
    assert rescue["window"] == WINDOW and rescue["retried"] is True
    assert rescue["outcome"] == "fitted" and rescue["status"] == 200
    # the window learned is the one stated; the retry's budget (the window less the output
    # reserve) is scaled into our count, the upstream counting ~5% more, for this request only
    assert rescue["tokens_before"] == count(first)
    assert rescue["learned"] == WINDOW
    assert rescue["budget"] == int((WINDOW - RESERVE) * (count(first) / int(sent * 1.05)))
    assert count(retry) == rescue["tokens_after"] <= rescue["budget"]
    assert row["status"] == 200 and row["tokens_after"] == count(retry)
    assert row["report"]["tokens"]["budget"] == rescue["budget"]
    assert metric(proxy, "fitted") == 1.0


def test_the_learned_window_holds_for_the_next_request(live_proxy, edge: EdgeUpstream) -> None:
    messages = conversation()
    edge.replies = [openai_overflow(count(messages)), Reply.json(chat_completion("a"))]
    edge.reply = Reply.json(chat_completion("b"))
    proxy = live_proxy(settings_for(edge))
    client = client_for(proxy)
    client.chat.completions.create(model=MODEL, messages=messages)
    more = [*messages, {"role": "assistant", "content": "a"}, {"role": "user", "content": "And?"}]
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=more)
    assert raw.parse().choices[0].message.content == "b"
    assert len(edge.seen) == 3  # no second overflow: compacted before it was sent
    assert count(edge.seen[2].json()["messages"]) <= WINDOW - RESERVE
    row = proxy.row(raw.headers["x-ctxproxy-request-id"])
    assert "rescue" not in row["report"] and row["report"]["tokens"]["budget"] == WINDOW - RESERVE


def test_a_restarted_proxy_remembers_the_learned_window(edge: EdgeUpstream, tmp_path: Path) -> None:
    """The window learned before a restart (or by another replica on the same store) holds:
    the first request after it is compacted before it is sent, with no second overflow."""
    messages = conversation()
    edge.replies = [openai_overflow(count(messages)), Reply.json(chat_completion("a"))]
    edge.reply = Reply.json(chat_completion("b"))
    db = str(tmp_path / "shared.db")
    server, url = serve_in_thread(create_app(settings_for(edge), db_path=db, strict=True))
    try:
        client_for(LiveProxy(url, db)).chat.completions.create(model=MODEL, messages=messages)
    finally:
        stop(server)  # its store is closed: what was queued is written
    server, url = serve_in_thread(create_app(settings_for(edge), db_path=db, strict=True))
    try:
        proxy = LiveProxy(url, db)
        more = [
            *messages,
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "And?"},
        ]
        raw = client_for(proxy).chat.completions.with_raw_response.create(
            model=MODEL, messages=more
        )
        assert raw.parse().choices[0].message.content == "b"
        assert len(edge.seen) == 3  # the overflow, its retry, and this one compacted at once
        assert count(edge.seen[2].json()["messages"]) <= WINDOW - RESERVE
        row = proxy.row(raw.headers["x-ctxproxy-request-id"])
        assert "rescue" not in row["report"]
        assert row["report"]["tokens"]["budget"] == WINDOW - RESERVE
    finally:
        stop(server)


def test_a_floor_that_cannot_fit_gets_the_upstreams_400(live_proxy, edge: EdgeUpstream) -> None:
    task = "Refactor this module:\n" + "\n".join(
        f"x_{i} = {i} * 17  # step {i}" for i in range(900)
    )
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": task}]
    assert count(messages) > WINDOW
    edge.replies = [openai_overflow(count(messages))]
    edge.reply = Reply.json(chat_completion("never"))
    proxy = live_proxy(settings_for(edge))
    with pytest.raises(openai.BadRequestError) as info:
        client_for(proxy).chat.completions.create(model=MODEL, messages=messages)
    assert info.value.status_code == 400 and info.value.code == "context_length_exceeded"
    body = info.value.body
    assert isinstance(body, dict) and "maximum context length is 4000" in body["message"]
    assert len(edge.seen) == 1  # no retry that could only fail again
    request_id = info.value.response.headers["x-ctxproxy-request-id"]
    rescue = proxy.row(request_id)["report"]["rescue"]
    assert rescue["outcome"] == "floor_too_big" and rescue["retried"] is False
    assert rescue["tokens_after"] > rescue["budget"]
    assert metric(proxy, "floor_too_big") == 1.0


def test_a_retry_that_overflows_again_is_relayed(live_proxy, edge: EdgeUpstream) -> None:
    messages = conversation()
    edge.replies = [openai_overflow(count(messages)), openai_overflow(count(messages))]
    edge.reply = Reply.json(chat_completion("never"))
    proxy = live_proxy(settings_for(edge))
    with pytest.raises(openai.BadRequestError) as info:
        client_for(proxy).chat.completions.create(model=MODEL, messages=messages)
    assert info.value.code == "context_length_exceeded"
    assert len(edge.seen) == 2  # one retry, never a loop
    rescue = proxy.row(info.value.response.headers["x-ctxproxy-request-id"])["report"]["rescue"]
    assert (rescue["outcome"], rescue["retried"], rescue["status"]) == ("failed_again", True, 400)


def test_an_error_stating_no_window_is_relayed_untouched(live_proxy, edge: EdgeUpstream) -> None:
    error = {"message": "Too long.", "type": "invalid_request_error", "param": None}
    edge.replies = [Reply.json({"error": {**error, "code": "context_length_exceeded"}}, 400)]
    proxy = live_proxy(settings_for(edge))
    with pytest.raises(openai.BadRequestError) as info:
        client_for(proxy).chat.completions.create(model=MODEL, messages=conversation())
    assert info.value.body == {**error, "code": "context_length_exceeded"}
    assert len(edge.seen) == 1
    rescue = proxy.row(info.value.response.headers["x-ctxproxy-request-id"])["report"]["rescue"]
    assert rescue["outcome"] == "no_window"


def test_a_retry_dripped_slowly_is_cut_at_the_answer_bound(live_proxy, edge: EdgeUpstream) -> None:
    """The retry's answer waits within ``limits.stream_max_s`` as the first's does: a gateway's
    whitespace dripped forever on the retry is a 504 at the bound, the rescue recorded."""
    drip = Reply(chunks=[b'{"id": "c1",'] + [b" "] * 200, chunk_delay_s=0.1)
    edge.replies = [openai_overflow(count(conversation())), drip]
    proxy = live_proxy(settings_for(edge, limits={"stream_max_s": 0.6}))
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as info:
        client_for(proxy).chat.completions.create(model=MODEL, messages=conversation())
    took = time.monotonic() - started
    assert 0.6 <= took < 3, took
    assert info.value.status_code == 504 and "stream_max_s" in str(info.value.body)
    assert len(edge.seen) == 2
    row = proxy.row(info.value.response.headers["x-ctxproxy-request-id"])
    assert row["error_type"] == "stream_max_exceeded"
    rescue = row["report"]["rescue"]
    assert (rescue["outcome"], rescue["retried"], rescue["status"]) == ("failed_again", True, 504)


ANTHROPIC_MESSAGE = anthropic_message(
    "fitted", model="claude-sonnet-4-5", usage={"input_tokens": 1200, "output_tokens": 2}
)


def test_anthropics_prompt_too_long_through_litellm(
    live_proxy, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """litellm against a loopback server answering as Anthropic's Messages API does."""
    monkeypatch.setenv("RESCUE_TEST_KEY", "sk-ant-test-0000000000")
    messages = conversation()
    sent = count(messages)
    too_long = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {sent} tokens > {WINDOW} maximum",
        },
    }
    edge.replies = [Reply.json(too_long, status=400), Reply.json(ANTHROPIC_MESSAGE)]
    spec = {
        "name": "claude",
        "match": ["anthropic/*"],
        "kind": "litellm",
        "base_url": edge.url,
        "api_key_env": "RESCUE_TEST_KEY",
    }
    proxy = live_proxy(settings_for(edge, upstreams=[spec]))
    raw = client_for(proxy).chat.completions.with_raw_response.create(
        model="anthropic/claude-sonnet-4-5", messages=messages, max_tokens=50
    )
    assert raw.parse().choices[0].message.content == "fitted"
    assert len(edge.seen) == 2
    assert edge.seen[0].target.endswith("/v1/messages")
    first, retry = (seen.json()["messages"] for seen in edge.seen)
    assert len(json.dumps(retry)) < len(json.dumps(first)) / 2  # masked or dropped to fit
    rescue = proxy.row(raw.headers["x-ctxproxy-request-id"])["report"]["rescue"]
    assert (rescue["window"], rescue["outcome"]) == (WINDOW, "fitted")
    assert rescue["tokens_after"] <= rescue["budget"] <= WINDOW - RESERVE


def _chunk(content: str | None, finish: str | None = None) -> dict[str, Any]:
    delta = {"content": content} if content is not None else {}
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def test_the_retry_rewrites_the_clients_request_not_the_forwarded_one(
    live_proxy, edge: EdgeUpstream
) -> None:
    """The first forwarded request was compacted already (its dropped-turns line in place of
    turns): the retry is the client's request compacted further, so its lines count the
    client's messages, never the first's line as a user turn nor a line per earlier compaction."""
    messages = conversation(24)
    edge.replies = [openai_overflow(count(messages)), Reply.json(chat_completion("fitted"))]
    pipeline = {"on_rule_error": "fail", "output_reserve_tokens": RESERVE, "budget_tokens": 5000}
    proxy = live_proxy(proxy_settings(edge.base_url, pipeline=pipeline))
    client_for(proxy).chat.completions.create(model=MODEL, messages=messages)
    first, retry = (seen.json()["messages"] for seen in edge.seen)
    lines = [m["content"] for m in retry if "[ctxproxy: dropped" in str(m.get("content"))]
    assert any("[ctxproxy: dropped" in str(m.get("content")) for m in first)
    assert len(lines) == 1 and "user" not in lines[0].split(" to fit")[0]
