"""Cache breakpoints for Claude through litellm, checked on what litellm really sends: a scripted
Anthropic Messages API on loopback (``EdgeUpstream``) records each request's body. The proxy
runs in-process, and once live behind the real ``openai`` SDK."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import (
    anthropic_message,
    assistant,
    call,
    chat_completion,
    request,
    result,
    user,
)

KEY = "sk-ant-test-key-000000000000"
MODEL = "anthropic/claude-sonnet-4-5"
EPHEMERAL = {"type": "ephemeral"}
LONG = "Follow the repository's conventions and keep every change small. " * 90  # ~1,450 tokens
ANTHROPIC_REPLY = anthropic_message("done", model="claude-sonnet-4-5")


def _tool(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name}: "
            + "Runs a command in the workspace and returns output. " * 50,
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }


TOOLS = [_tool("bash"), _tool("read_file")]  # ~1,300 tokens: a prefix worth caching by itself


@pytest.fixture
def anthropic() -> Iterator[EdgeUpstream]:
    server = EdgeUpstream().start()
    server.reply = Reply.json(ANTHROPIC_REPLY)
    yield server
    server.stop()


def _settings(server: EdgeUpstream, monkeypatch: pytest.MonkeyPatch, **upstream: Any) -> Any:
    monkeypatch.setenv("CLAUDE_TEST_KEY", KEY)
    spec = {
        "name": "claude",
        "match": ["anthropic/*"],
        "kind": "litellm",
        "api_key_env": "CLAUDE_TEST_KEY",
        "base_url": server.url,
        **upstream,
    }
    return proxy_settings("http://unused.test/v1", upstreams=[spec])


def _agent_turn(**extra: Any) -> dict[str, Any]:
    """An agent's second request: the task, a tool call, its result (the tail)."""
    return request(
        {"role": "system", "content": LONG},
        user("Run the tests and tell me what fails."),
        assistant(None, call("call_1", "bash", command="pytest -q")),
        result("call_1", "3 passed, 1 failed: test_parse"),
        model=MODEL,
        max_tokens=100,
        tools=TOOLS,
        **extra,
    )


def marks(sent: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Where Anthropic's request carries ``cache_control``: tools, system blocks, message blocks
    (and blocks nested in a tool result)."""
    found: list[tuple[Any, ...]] = []
    found += [("tools", i) for i, t in enumerate(sent.get("tools", [])) if "cache_control" in t]
    system = sent.get("system")
    if isinstance(system, list):
        found += [("system", i) for i, b in enumerate(system) if "cache_control" in b]
    for i, message in enumerate(sent["messages"]):
        content = message["content"]
        for j, block in enumerate(content if isinstance(content, list) else []):
            if "cache_control" in block:
                found.append(("messages", i, j))
            nested = block.get("content")
            for k, inner in enumerate(nested if isinstance(nested, list) else []):
                if "cache_control" in inner:
                    found.append(("messages", i, j, k))
    return found


async def test_system_tools_previous_tail_and_tail_are_marked(
    tmp_path: Path, anthropic: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with in_process(_settings(anthropic, monkeypatch), str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=_agent_turn())
        rows = await log_rows(client)
    assert r.status_code == 200, r.text
    sent = anthropic.last.json()
    assert anthropic.last.target == "/v1/messages"
    # the last tool, the system block, the user turn the previous request ended with, and the
    # tool result this one ends with: four marks, nothing else
    assert marks(sent) == [("tools", 1), ("system", 0), ("messages", 0, 0), ("messages", 2, 0)]
    assert sent["tools"][1]["cache_control"] == EPHEMERAL
    assert sent["system"][0] == {"type": "text", "text": LONG, "cache_control": EPHEMERAL}
    assert sent["messages"][0]["content"][0]["text"] == "Run the tests and tell me what fails."
    tail = sent["messages"][2]["content"][0]
    assert tail["type"] == "tool_result" and tail["cache_control"] == EPHEMERAL
    assert anthropic.last.body.count(b'"cache_control"') == 4
    report = rows[0]["report"]["breakpoints"]
    assert report == {"placed": ["tools", "system", "previous_tail", "tail"], "client": 0}


async def test_the_clients_marks_stay_and_the_total_never_exceeds_four(
    tmp_path: Path, anthropic: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three of the client's (on a tool, the system prompt, an early assistant answer): ours get
    the one slot left, on the tail; the previous tail, next in line, gets none."""
    tools = [{**TOOLS[0], "cache_control": EPHEMERAL}, TOOLS[1]]
    system = {
        "role": "system",
        "content": [{"type": "text", "text": LONG, "cache_control": EPHEMERAL}],
    }
    answer = {
        "role": "assistant",
        "content": [{"type": "text", "text": "Sure.", "cache_control": EPHEMERAL}],
    }
    body = request(
        system,
        user("Hello."),
        answer,
        user("Run the tests."),
        assistant(None, call("call_1", "bash", command="pytest -q")),
        result("call_1", "1 failed"),
        model=MODEL,
        max_tokens=100,
        tools=tools,
    )
    async with in_process(_settings(anthropic, monkeypatch), str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=body)
        rows = await log_rows(client)
    assert r.status_code == 200, r.text
    sent = anthropic.last.json()
    # theirs where they put them, ours on the tail's tool result
    assert marks(sent) == [("tools", 0), ("system", 0), ("messages", 1, 0), ("messages", 4, 0)]
    assert sent["messages"][1]["content"][0]["text"] == "Sure."
    assert sent["messages"][4]["content"][0]["type"] == "tool_result"
    assert rows[0]["report"]["breakpoints"] == {"placed": ["tail"], "client": 3}


async def test_four_of_the_clients_leave_no_room(
    tmp_path: Path, anthropic: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = _agent_turn()
    body["tools"] = [{**t, "cache_control": EPHEMERAL} for t in TOOLS]
    body["messages"][1] = {
        "role": "user",
        "content": [
            {"type": "text", "text": "Run the tests.", "cache_control": EPHEMERAL},
            {"type": "text", "text": "Then tell me.", "cache_control": EPHEMERAL},
        ],
    }
    async with in_process(_settings(anthropic, monkeypatch), str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=body)
        rows = await log_rows(client)
    assert r.status_code == 200, r.text
    sent = anthropic.last.json()
    assert marks(sent) == [("tools", 0), ("tools", 1), ("messages", 0, 0), ("messages", 0, 1)]
    assert rows[0]["report"]["breakpoints"] == {"placed": [], "client": 4}


async def test_a_short_prompt_gets_none(
    tmp_path: Path, anthropic: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = request(
        {"role": "system", "content": "Be brief."}, user("hi"), model=MODEL, max_tokens=20
    )
    async with in_process(_settings(anthropic, monkeypatch), str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=body)
        rows = await log_rows(client)
    assert r.status_code == 200, r.text
    assert b"cache_control" not in anthropic.last.body
    assert rows[0]["report"]["breakpoints"] == {"placed": [], "client": 0, "skipped": "short"}


async def test_off_sends_the_clients_marks_only(
    tmp_path: Path, anthropic: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(anthropic, monkeypatch, cache_breakpoints="off")
    body = _agent_turn()
    body["tools"] = [TOOLS[0], {**TOOLS[1], "cache_control": EPHEMERAL}]
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=body)
        rows = await log_rows(client)
    assert r.status_code == 200, r.text
    assert marks(anthropic.last.json()) == [("tools", 1)]
    assert "breakpoints" not in rows[0]["report"]


async def test_a_developer_message_is_marked_on_its_part(
    tmp_path: Path, anthropic: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """litellm turns ``developer`` into ``system`` keeping only the content: the mark must be
    on a part, not on the message, to reach Anthropic."""
    body = request({"role": "developer", "content": LONG}, user("hi"), model=MODEL, max_tokens=20)
    async with in_process(_settings(anthropic, monkeypatch), str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    sent = anthropic.last.json()
    assert sent["system"] == [{"type": "text", "text": LONG, "cache_control": EPHEMERAL}]
    assert marks(sent) == [("system", 0), ("messages", 0, 0)]


async def test_an_openai_provider_through_litellm_gets_none(
    tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenAI caches by itself: a litellm upstream pinned to openai forwards no marks."""
    monkeypatch.setenv("OPENAI_TEST_KEY", "sk-openai-test-0000000000")
    edge.reply = Reply.json(chat_completion("hi"))
    spec = {
        "name": "oai",
        "match": ["openai/*"],
        "kind": "litellm",
        "provider": "openai",
        "api_key_env": "OPENAI_TEST_KEY",
        "base_url": edge.base_url,
    }
    settings = proxy_settings("http://unused.test/v1", upstreams=[spec])
    body = _agent_turn()
    body["model"] = "openai/gpt-4o"
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=body)
        rows = await log_rows(client)
    assert r.status_code == 200, r.text
    assert edge.last.target == "/v1/chat/completions"
    assert edge.last.json()["messages"][0]["content"] == LONG  # the request did reach it
    assert b"cache_control" not in edge.last.body
    assert "breakpoints" not in rows[0]["report"]


def _sse(*events: dict[str, Any]) -> Reply:
    data = b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events
    )
    return Reply.event_stream(data)


STREAMED = _sse(
    {"type": "message_start", "message": {**ANTHROPIC_REPLY, "content": [], "stop_reason": None}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
    {"type": "message_stop"},
)


def test_openai_sdk_next_request_reads_what_the_last_one_wrote(
    live_proxy: Any, anthropic: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two turns of an agent through a live proxy and the real SDK: the second request's prefix
    up to its previous-tail mark is, block for block, the first request's up to its tail mark,
    so Anthropic can read there what the first one wrote. The SDK's own body stays unmarked."""
    proxy = live_proxy(_settings(anthropic, monkeypatch))
    client = openai.OpenAI(base_url=proxy.base_url, api_key="unused-client-key")
    first = [{"role": "system", "content": LONG}, {"role": "user", "content": "Run the tests."}]
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=first, tools=TOOLS, max_tokens=50
    )
    assert raw.parse().choices[0].message.content == "done"
    anthropic.reply = STREAMED
    second = [
        *first,
        assistant(None, call("call_1", "bash", command="pytest -q")),
        result("call_1", "1 failed"),
    ]
    kept = orjson.dumps(second)
    streamed = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=second, tools=TOOLS, max_tokens=50, stream=True
    )
    chunks = streamed.parse()
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "ok"
    assert orjson.dumps(second) == kept  # the client's own list is left as it was
    one, two = (seen.json() for seen in anthropic.seen)
    assert marks(one) == [("tools", 1), ("system", 0), ("messages", 0, 0)]
    assert marks(two) == [("tools", 1), ("system", 0), ("messages", 0, 0), ("messages", 2, 0)]
    assert (two["tools"], two["system"]) == (one["tools"], one["system"])
    assert two["messages"][0] == one["messages"][-1]  # the previous tail, mark and all
    rows = [proxy.row(r.headers["x-ctxproxy-request-id"]) for r in (raw, streamed)]
    assert [r["report"]["breakpoints"]["placed"] for r in rows] == [
        ["tools", "system", "tail"],
        ["tools", "system", "previous_tail", "tail"],
    ]


BEDROCK_REPLY = {
    "output": {"message": {"role": "assistant", "content": [{"text": "done"}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 10, "outputTokens": 2, "totalTokens": 12},
    "metrics": {"latencyMs": 1},
}


@pytest.mark.parametrize(
    ("model", "cache_points"),
    [
        ("bedrock/anthropic.claude-3-5-sonnet-20241022-v2:0", 4),
        ("bedrock/meta.llama3-70b-instruct-v1:0", 0),
    ],
)
async def test_claude_on_bedrock_gets_cache_points(
    tmp_path: Path,
    edge: EdgeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    cache_points: int,
) -> None:
    """Through Bedrock's Converse API (a bearer API key: no request signing) litellm turns the
    marks into ``cachePoint`` blocks after the system text, the tools, the previous tail and the
    tool result; a model that is not Claude gets none."""
    monkeypatch.setenv("BEDROCK_TEST_KEY", "bedrock-api-key-000000000")
    monkeypatch.setenv("AWS_REGION_NAME", "us-east-1")
    edge.reply = Reply.json(BEDROCK_REPLY)
    spec = {
        "name": "bedrock",
        "match": ["bedrock/*"],
        "kind": "litellm",
        "api_key_env": "BEDROCK_TEST_KEY",
        "base_url": edge.url,
    }
    settings = proxy_settings("http://unused.test/v1", upstreams=[spec])
    body = _agent_turn()
    body["model"] = model
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    assert edge.last.target.endswith("/converse")
    sent = edge.last.json()
    assert edge.last.body.count(b'"cachePoint"') == cache_points
    if cache_points:
        assert (
            "cachePoint" in sent["system"][-1] and "cachePoint" in sent["toolConfig"]["tools"][-1]
        )
        first, *_, last = sent["messages"]
        assert [list(b) for b in first["content"]] == [["text"], ["cachePoint"]]
        assert [list(b) for b in last["content"]] == [["toolResult"], ["cachePoint"]]
