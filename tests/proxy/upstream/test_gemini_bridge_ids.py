"""Tool-call ids through the Gemini bridge (``proxy.upstream.gemini_call_ids``,
``proxy.litellm_gemini_ids``), against scripted Anthropic and OpenAI upstreams on loopback: each
call and its response go with one id, unique in the conversation and one the provider accepts;
the answer's calls come back with the provider's ids, in JSON and in a stream."""

from __future__ import annotations

import os
import time
from typing import Any

import orjson
import pytest

from proxy.settings import UpstreamSettings
from proxy.upstream.gemini import generate
from proxy.upstream.gemini_call_ids import with_call_ids
from proxy.upstream.openai import UpstreamClient
from rules.chain.call_ids import rule_named
from tests.support.anthropic_upstream import sse_reply
from tests.support.edge_upstream import Reply, sse
from tests.support.factories import anthropic_message, chat_completion
from tests.support.gemini_bridge import client as client  # the fixture
from tests.support.gemini_bridge import route as route_of

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"  # litellm on httpx, as the other bridge tests
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

KEY = "sk-ant-dummy-bridge-key-00000000000000000000"
CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o"}


def _call(name: str, cid: str | None = None, **args: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": args}
    if cid is not None:
        call["id"] = cid
    return {"functionCall": call}


def _response(name: str, cid: str | None = None, output: str = "ok") -> dict[str, Any]:
    response: dict[str, Any] = {"name": name, "response": {"output": output}}
    if cid is not None:
        response["id"] = cid
    return {"functionResponse": response}


# Two turns of the Gemini CLI against a bridged model: its calls came back without ids, so it
# invented its own for the responses only; the second turn calls the same tool again.
CLI_TURNS = [
    {"role": "user", "parts": [{"text": "read a.py and b.py"}]},
    {"role": "model", "parts": [_call("read_file", path="a.py"), _call("read_file", path="b.py")]},
    {"role": "user", "parts": [_response("read_file", "read_file-1733-aa", "A"),
                               _response("read_file", "read_file-1733-bb", "B")]},
    {"role": "model", "parts": [{"text": "Now c."}, _call("read_file", path="c.py")]},
    {"role": "user", "parts": [_response("read_file", "read_file-1790-cc", "C")]},
]  # fmt: skip


def _pairs(messages: list[dict[str, Any]]) -> list[tuple[list[str], list[str]]]:
    """Each assistant turn's tool_use ids with the tool_result ids of the user turn after it."""
    out = []
    for k, m in enumerate(messages):
        if m["role"] != "assistant" or not isinstance(m["content"], list):
            continue
        uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        after = messages[k + 1]["content"] if k + 1 < len(messages) else []
        results = [b["tool_use_id"] for b in after if isinstance(b, dict)
                   and b.get("type") == "tool_result"]  # fmt: skip
        if uses:
            out.append((uses, results))
    return out


async def test_parallel_calls_of_one_tool_reach_anthropic_each_with_its_own_id(
    edge: Any, client: UpstreamClient
) -> None:
    edge.reply = Reply.json(anthropic_message("done"))
    upstream = UpstreamSettings(name="claude", kind="anthropic", base_url=edge.url)
    body = {"contents": CLI_TURNS}
    r = await generate(
        client, upstream, route_of("claude-sonnet-4-5"), orjson.dumps(body), {}, "", KEY
    )
    assert r.status == 200, r.body
    sent = edge.last.json()["messages"]
    pairs = _pairs(sent)
    assert [len(uses) for uses, _ in pairs] == [2, 1]
    every = [cid for uses, _ in pairs for cid in uses]
    assert len(set(every)) == 3  # litellm sent call_read_file three times
    for uses, results in pairs:
        assert results == uses  # each result answers its own call, in order
    tool_results = [b for m in sent if isinstance(m["content"], list) for b in m["content"]
                    if b.get("type") == "tool_result"]  # fmt: skip
    outputs = [orjson.loads(str(b["content"]))["output"] for b in tool_results]
    assert outputs == ["A", "B", "C"]


async def test_ids_are_the_same_on_every_request(edge: Any, client: UpstreamClient) -> None:
    """The ids a call gets from its place do not change as the conversation grows: the prefix
    the provider cached stays the same."""
    edge.reply = Reply.json(anthropic_message("done"))
    upstream = UpstreamSettings(name="claude", kind="anthropic", base_url=edge.url)
    route = route_of("claude-sonnet-4-5")
    await generate(client, upstream, route, orjson.dumps({"contents": CLI_TURNS[:3]}), {}, "", KEY)
    first = edge.last.json()["messages"]
    await generate(client, upstream, route, orjson.dumps({"contents": CLI_TURNS}), {}, "", KEY)
    second = edge.last.json()["messages"]
    assert second[: len(first)] == first


async def test_a_long_tool_name_fits_openai_id_limit(edge: Any, client: UpstreamClient) -> None:
    name = "mcp__company_internal_search__find_documents"  # 44 characters
    contents = [
        {"role": "user", "parts": [{"text": "find it"}]},
        {"role": "model", "parts": [_call(name, q="x")]},
        {"role": "user", "parts": [_response(name)]},
    ]
    edge.reply = Reply.json(chat_completion("found"))
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    body = orjson.dumps({"contents": contents})
    r = await generate(client, upstream, route_of("gpt-4o"), body, {}, "", KEY)
    assert r.status == 200, r.body
    sent = edge.last.json()["messages"]
    (call,) = sent[1]["tool_calls"]
    assert len(call["id"]) <= 40  # OpenAI refuses a longer one with a 400
    assert sent[2] == {**sent[2], "role": "tool", "tool_call_id": call["id"]}


async def test_client_ids_are_kept_and_an_unanswering_response_goes_as_text(
    edge: Any, client: UpstreamClient
) -> None:
    contents = [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"text": "thinking", "thought": True},
                                    _call("run", "toolu_01Abc", cmd="ls")]},
        {"role": "user", "parts": [_response("run", "toolu_01Abc", "a.py"),
                                   _response("other", "x-1", "stray"), {"text": "and then?"}]},
    ]  # fmt: skip
    edge.reply = Reply.json(chat_completion("ok"))
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    system = {"parts": [{"text": "Rule one."}, {"text": "Rule two."}]}
    body = orjson.dumps({"contents": contents, "systemInstruction": system})
    r = await generate(client, upstream, route_of("gpt-4o"), body, {}, "", KEY)
    assert r.status == 200, r.body
    sent = edge.last.json()["messages"]
    assert sent[0] == {"role": "system", "content": "Rule one.\n\nRule two."}
    assert not sent[2].get("content")  # the thought is not sent as the answer's text
    assert sent[2]["tool_calls"][0]["id"] == "toolu_01Abc"
    assert sent[3]["role"] == "tool" and sent[3]["tool_call_id"] == "toolu_01Abc"
    assert sent[4]["role"] == "user"  # after the result, never between call and result
    user = orjson.dumps(sent[4]["content"]).decode()
    assert "stray" in user and "and then?" in user
    assert len(sent) == 5


def _tool_call_answer() -> dict[str, Any]:
    answer = chat_completion("")
    answer["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_Aa1", "type": "function",
             "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}},
            {"id": "call_Bb2", "type": "function",
             "function": {"name": "read_file", "arguments": '{"path": "b.py"}'}},
        ],
    }  # fmt: skip
    answer["choices"][0]["finish_reason"] = "tool_calls"
    return answer


async def test_answer_calls_carry_the_providers_ids(edge: Any, client: UpstreamClient) -> None:
    edge.reply = Reply.json(_tool_call_answer())
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    body = orjson.dumps({"contents": CLI_TURNS[:1]})
    r = await generate(client, upstream, route_of("gpt-4o"), body, {}, "", KEY)
    assert r.status == 200, r.body
    parts = orjson.loads(r.body or b"")["candidates"][0]["content"]["parts"]
    calls = [p["functionCall"] for p in parts if "functionCall" in p]
    assert [(c["id"], c["args"]) for c in calls] == [
        ("call_Aa1", {"path": "a.py"}), ("call_Bb2", {"path": "b.py"})
    ]  # fmt: skip


def _tool_call_stream() -> Any:
    """Two calls streamed as OpenAI streams them, the second without arguments ("")."""

    def delta(**d: Any) -> dict[str, Any]:
        return {**CHUNK, "choices": [{"index": 0, "delta": d}]}

    first = {"index": 0, "id": "call_Aa1", "type": "function",
             "function": {"name": "read_file", "arguments": ""}}  # fmt: skip
    second = {"index": 1, "id": "call_Cc3", "type": "function",
              "function": {"name": "list_dir", "arguments": ""}}  # fmt: skip
    return sse_reply(
        sse(
            delta(role="assistant", content=None, tool_calls=[first]),
            delta(tool_calls=[{"index": 0, "function": {"arguments": '{"path": '}}]),
            delta(tool_calls=[{"index": 0, "function": {"arguments": '"a.py"}'}}]),
            delta(tool_calls=[second]),
            {**CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {**CHUNK, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}},
        )
    )


async def test_streamed_calls_carry_ids_and_a_call_without_arguments_is_kept(
    edge: Any, client: UpstreamClient
) -> None:
    edge.reply = _tool_call_stream()
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    body = orjson.dumps({"contents": CLI_TURNS[:1]})
    route = route_of("gpt-4o", "streamGenerateContent")
    r = await generate(client, upstream, route, body, {}, "alt=sse", KEY)
    assert r.chunks is not None
    data = b"".join([c async for c in r.chunks])
    events = [orjson.loads(line[5:]) for line in data.split(b"\n") if line.startswith(b"data:")]
    calls = [p["functionCall"] for e in events for c in e.get("candidates", [])
             for p in c["content"]["parts"] if "functionCall" in p]  # fmt: skip
    assert calls == [
        {"name": "read_file", "args": {"path": "a.py"}, "id": "call_Aa1"},
        {"name": "list_dir", "args": {}, "id": "call_Cc3"},
    ]
    assert events[-1]["usageMetadata"]["promptTokenCount"] == 9


@pytest.mark.parametrize("rule", ["anthropic", "openai", "mistral", "any"])
def test_with_call_ids_pairs_by_id_then_name_and_leaves_the_input_alone(rule: str) -> None:
    contents = [
        {"role": "model", "parts": [_call("a", "dup"), _call("a", "dup"), _call("b")]},
        {"role": "user", "parts": [_response("b"), _response("a", "dup"), _response("a")]},
    ]
    before = orjson.dumps(contents)
    out = with_call_ids(contents, rule_named(rule))
    assert orjson.dumps(contents) == before
    calls = [p["functionCall"]["id"] for p in out[0]["parts"]]
    answers = [p["functionResponse"]["id"] for p in out[1]["parts"]]
    assert len(set(calls)) == 3 and all(rule_named(rule).accepts(c) for c in calls)
    assert answers == [calls[2], calls[0], calls[1]]


def test_a_response_pairs_with_the_id_its_client_gave_before_one_given_here() -> None:
    """Calls x, x (given x_1 here) and x_1 (given x_1_1): the response the client sent as x_1
    answers the call it named x_1, not the one renamed to it."""
    contents = [
        {"role": "model", "parts": [_call("a", "x"), _call("b", "x"), _call("c", "x_1")]},
        {
            "role": "user",
            "parts": [_response("c", "x_1"), _response("a", "x"), _response("b", "x")],
        },
    ]
    out = with_call_ids(contents, rule_named("anthropic"))
    calls = {p["functionCall"]["name"]: p["functionCall"]["id"] for p in out[0]["parts"]}
    answers = {p["functionResponse"]["name"]: p["functionResponse"]["id"] for p in out[1]["parts"]}
    assert answers == calls and len(set(calls.values())) == 3


def test_thousands_of_one_id_are_paired_in_linear_time() -> None:
    """A hostile body of 20,000 calls sharing one id, and as many responses answering none:
    paired in well under a second (each renamed id and each response once), not in minutes."""
    n = 20_000
    contents = [
        {"role": "model", "parts": [_call("a", "x") for _ in range(n)]},
        {"role": "user", "parts": [_response("b") for _ in range(n)]},
    ]
    began = time.perf_counter()
    out = with_call_ids(contents, rule_named("openai"))
    assert time.perf_counter() - began < 2.0
    assert len({p["functionCall"]["id"] for p in out[0]["parts"]}) == n


def _stream_of(*deltas: dict[str, Any]) -> Any:
    chunks = [{**CHUNK, "choices": [{"index": 0, "delta": d}]} for d in deltas]
    end = {**CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    return sse_reply(sse(*chunks, end))


def _tc(cid: str | None, name: str | None, arguments: str) -> dict[str, Any]:
    call: dict[str, Any] = {"index": 0, "function": {"arguments": arguments}}
    if cid is not None:
        call.update(id=cid, type="function")
    if name is not None:
        call["function"]["name"] = name
    return {"tool_calls": [call]}


@pytest.mark.parametrize(
    ("deltas", "wanted"),
    [
        # a server that streams each parallel call at index 0: each keeps its own id
        (
            [_tc("id_A", "f", ""), _tc(None, None, '{"x": 1}'),
             _tc("id_B", "g", ""), _tc(None, None, '{"y": 2}')],
            [("f", {"x": 1}, "id_A"), ("g", {"y": 2}, "id_B")],
        ),
        # an empty delta after the call was done opens no call of its own
        ([_tc("id_A", "f", '{"x": 1}'), _tc(None, None, "")], [("f", {"x": 1}, "id_A")]),
    ],
)  # fmt: skip
async def test_streamed_calls_at_one_index(
    edge: Any, client: UpstreamClient, deltas: list[dict[str, Any]], wanted: list[Any]
) -> None:
    edge.reply = _stream_of({"role": "assistant", "content": None}, *deltas)
    upstream = UpstreamSettings(name="oai", base_url=edge.base_url)
    route = route_of("gpt-4o", "streamGenerateContent")
    r = await generate(client, upstream, route, orjson.dumps({"contents": CLI_TURNS[:1]}), {},
                       "alt=sse", KEY)  # fmt: skip
    assert r.chunks is not None
    data = b"".join([c async for c in r.chunks])
    events = [orjson.loads(line[5:]) for line in data.split(b"\n") if line.startswith(b"data:")]
    calls = [p["functionCall"] for e in events for c in e.get("candidates", [])
             for p in c["content"]["parts"] if "functionCall" in p]  # fmt: skip
    assert [(c["name"], c["args"], c["id"]) for c in calls] == wanted
