"""Gemini function names through the bridge (``proxy.upstream.gemini_tool_names``): a name
Gemini allows and OpenAI or Anthropic refuse (dots, colons, over 64 characters) goes fitted, in
the declarations and the history alike, the same on every request; the answer's calls come back
under the name the client declared, in JSON and in a stream. Before, the name went as it was
and OpenAI answered 400 "Invalid 'tools[0].function.name'" on every retry."""

from __future__ import annotations

import os
import re
from typing import Any

import orjson
import pytest

from proxy.settings import UpstreamSettings
from proxy.upstream.gemini import generate
from proxy.upstream.gemini_tool_names import fitted_names
from proxy.upstream.openai import UpstreamClient
from tests.support.anthropic_upstream import sse_reply
from tests.support.edge_upstream import Reply, sse
from tests.support.factories import chat_completion
from tests.support.gemini_bridge import client as client  # the fixture
from tests.support.gemini_bridge import route as route_of

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"  # litellm on httpx, as the other bridge tests
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

KEY = "sk-dummy-bridge-key-00000000000000000000"
CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o"}
OPENAI_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
LONG = "tools.search." + "x" * 60
TOOLS = [
    {
        "functionDeclarations": [
            {"name": "files.read", "description": "read", "parameters": {"type": "object"}},
            {"name": "files_read", "description": "another", "parameters": {"type": "object"}},
            {"name": "db:query", "description": "sql", "parameters": {"type": "object"}},
            {"name": LONG, "description": "long", "parameters": {"type": "object"}},
        ]
    }
]
CONTENTS = [
    {"role": "user", "parts": [{"text": "read a.py"}]},
    {"role": "model", "parts": [{"functionCall": {"name": "files.read", "args": {"p": "a.py"}}}]},
    {"role": "user", "parts": [{"functionResponse": {"name": "files.read",
                                                     "response": {"output": "A"}}}]},
]  # fmt: skip


def _answer_calling(name: str) -> dict[str, Any]:
    answer = chat_completion("")
    answer["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": name, "arguments": '{"sql": "select 1"}'}}],
    }  # fmt: skip
    answer["choices"][0]["finish_reason"] = "tool_calls"
    return answer


def test_names_are_fitted_apart_and_alike_every_time() -> None:
    names = fitted_names(TOOLS, CONTENTS)
    assert set(names) == {"files.read", "db:query", LONG}  # files_read fits as it is
    assert all(OPENAI_NAME.fullmatch(n) for n in names.values())
    assert len(set(names.values()) | {"files_read"}) == 4  # none meets another
    assert names["db:query"].startswith("db_query_")
    assert fitted_names(TOOLS, CONTENTS) == names
    assert fitted_names([{"functionDeclarations": [{"name": "ok_name"}]}], []) == {}


def test_a_fitted_name_depends_on_its_own_name_alone() -> None:
    """``files.read`` goes as the same name whether or not the request also holds a
    ``files_read`` (declared in one turn, not in another): a name that changed between
    requests of a conversation rewrote its cached prefix and the model's own earlier calls."""
    alone = fitted_names([{"functionDeclarations": [{"name": "files.read"}]}], [])
    beside = fitted_names(
        [{"functionDeclarations": [{"name": "files.read"}, {"name": "files_read"}]}], []
    )
    assert alone["files.read"] == beside["files.read"] != "files_read"


async def test_declarations_and_history_go_fitted_and_the_answer_comes_back_as_declared(
    edge: Any, client: UpstreamClient
) -> None:
    names = fitted_names(TOOLS, CONTENTS)
    edge.reply = Reply.json(_answer_calling(names["db:query"]))
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    body = orjson.dumps({"contents": CONTENTS, "tools": TOOLS})
    r = await generate(client, upstream, route_of("gpt-4o"), body, {}, "", KEY)
    assert r.status == 200, r.body
    sent = edge.last.json()
    declared = [t["function"]["name"] for t in sent["tools"]]
    assert all(OPENAI_NAME.fullmatch(n) for n in declared), declared
    assert declared[1] == "files_read" and declared[0] != "files_read"
    assert sent["messages"][1]["tool_calls"][0]["function"]["name"] == declared[0]
    first = edge.last.body
    parts = orjson.loads(r.body or b"")["candidates"][0]["content"]["parts"]
    assert parts[0]["functionCall"]["name"] == "db:query"
    await generate(client, upstream, route_of("gpt-4o"), body, {}, "", KEY)
    assert edge.last.body == first  # the same bytes on the next request: its prefix cached


async def test_a_streamed_call_comes_back_as_declared(edge: Any, client: UpstreamClient) -> None:
    fitted = fitted_names(TOOLS, CONTENTS)["db:query"]
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": fitted, "arguments": '{"sql": "select 1"}'}}  # fmt: skip
    edge.reply = sse_reply(
        sse(
            {**CHUNK, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                         "tool_calls": [call]}}]},
            {**CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        )
    )  # fmt: skip
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    body = orjson.dumps({"contents": CONTENTS, "tools": TOOLS})
    route = route_of("gpt-4o", "streamGenerateContent")
    r = await generate(client, upstream, route, body, {}, "alt=sse", KEY)
    assert r.chunks is not None
    data = b"".join([c async for c in r.chunks])
    events = [orjson.loads(line[5:]) for line in data.split(b"\n") if line.startswith(b"data:")]
    calls = [p["functionCall"]["name"] for e in events for c in e.get("candidates", [])
             for p in c["content"]["parts"] if "functionCall" in p]  # fmt: skip
    assert calls == ["db:query"]
