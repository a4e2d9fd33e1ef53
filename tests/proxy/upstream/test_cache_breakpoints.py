"""Where ``with_breakpoints`` puts its marks, on request bodies alone (no litellm, no network):
the tail and previous tail across conversation shapes, the client's own marks and TTLs, the size
minimum, and that the client's body is left as it was."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from proxy.settings import UpstreamSettings
from proxy.upstream.cache_breakpoints import wants_breakpoints, with_breakpoints
from tests.support.factories import assistant, call, request, result, user

EPHEMERAL = {"type": "ephemeral"}
LONG = "Follow the repository's conventions and keep every change small. " * 90  # ~1,450 tokens
ANTHROPIC = UpstreamSettings(name="claude", kind="litellm", match=["anthropic/*"])
MODEL = "anthropic/claude-sonnet-4-5"


def _tools() -> list[dict[str, Any]]:
    fn = {"name": "bash", "description": "Runs a command. " * 300, "parameters": {}}
    return [{"type": "function", "function": {**fn, "name": n}} for n in ("bash", "read_file")]


def placed(body: dict[str, Any], upstream: UpstreamSettings = ANTHROPIC) -> dict[str, Any] | None:
    return with_breakpoints(upstream, "anthropic", body)[1]


def marked_messages(body: dict[str, Any]) -> list[int]:
    """Indexes of the messages that carry a mark (on the message or a part)."""
    out = with_breakpoints(ANTHROPIC, "anthropic", body)[0]
    found = []
    for i, m in enumerate(out["messages"]):
        parts = m["content"] if isinstance(m.get("content"), list) else []
        if "cache_control" in m or any("cache_control" in p for p in parts):
            found.append(i)
    return found


def test_the_clients_body_is_left_alone_and_the_output_is_deterministic() -> None:
    body = request(
        {"role": "system", "content": LONG},
        user("Run the tests."),
        assistant(None, call("c1", command="pytest")),
        result("c1", "1 failed"),
        model=MODEL,
        tools=_tools(),
    )
    before = copy.deepcopy(body)
    out, report = with_breakpoints(ANTHROPIC, "anthropic", body)
    assert body == before  # nothing added to the client's dicts, however deep
    assert report == {"placed": ["tools", "system", "previous_tail", "tail"], "client": 0}
    again, _ = with_breakpoints(ANTHROPIC, "anthropic", copy.deepcopy(before))
    assert orjson.dumps(out) == orjson.dumps(again)
    # each mark is a dict of its own: litellm may not change one through another
    marks = [out["tools"][-1]["cache_control"], out["messages"][0]["content"][-1]["cache_control"]]
    assert marks[0] == marks[1] == EPHEMERAL and marks[0] is not marks[1]
    assert out["messages"][2] is body["messages"][2]  # an unmarked message is passed as it is


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("anthropic", "anthropic/claude-x", True),
        ("anthropic", "my-claude-alias", True),
        ("bedrock", "bedrock/anthropic.claude-3-5-sonnet-20241022-v2:0", True),
        ("bedrock", "bedrock/meta.llama3-70b-instruct-v1:0", False),
        ("vertex_ai", "vertex_ai/claude-sonnet-4@20250514", True),
        ("vertex_ai", "vertex_ai/gemini-2.5-pro", False),
        ("gemini", "gemini/gemini-2.5-pro", False),
        ("openai", "openai/gpt-4o", False),
        ("deepseek", "deepseek/deepseek-chat", False),
    ],
)
def test_only_claude_gets_breakpoints(provider: str, model: str, expected: bool) -> None:
    assert wants_breakpoints(ANTHROPIC, provider, model) is expected
    off = ANTHROPIC.model_copy(update={"cache_breakpoints": "off"})
    assert not wants_breakpoints(off, provider, model)


def test_the_previous_tail_is_the_message_before_the_last_answer() -> None:
    """Parallel results and an answer split over two assistant messages: the previous request
    ended with the user's message, before both."""
    body = request(
        {"role": "system", "content": LONG},
        user("Check both."),
        assistant("Looking."),
        assistant(None, call("c1", command="ls"), call("c2", command="pwd")),
        result("c1", "a b"),
        result("c2", "/w"),
        model=MODEL,
    )
    assert marked_messages(body) == [0, 1, 5]


def test_a_first_request_has_no_previous_tail_and_an_assistant_prefill_is_a_tail() -> None:
    first = request({"role": "system", "content": LONG}, user("Hi."), model=MODEL)
    assert placed(first) == {"placed": ["system", "tail"], "client": 0}
    prefill = request(
        {"role": "system", "content": LONG}, user("Hi."), assistant("Hello"), model=MODEL
    )
    assert marked_messages(prefill) == [0, 2]


def test_a_ctxproxy_block_appended_to_the_tail_is_part_of_the_tail() -> None:
    """inject's blocks are replayed in place on later requests, so the tail is marked whole:
    the mark covers the block, on the last part."""
    block = "<ctxproxy-context>\nWorking set: …\n</ctxproxy-context>"
    body = request({"role": "system", "content": LONG}, user(f"Go on.\n\n{block}"), model=MODEL)
    out, _ = with_breakpoints(ANTHROPIC, "anthropic", body)
    assert out["messages"][1]["content"] == [
        {"type": "text", "text": f"Go on.\n\n{block}", "cache_control": EPHEMERAL}
    ]


def test_what_cannot_carry_a_mark_gets_none() -> None:
    """Empty text, an assistant message that is only tool calls, a last part that litellm would
    not carry (an image in an assistant message) are skipped; a user's image is marked."""
    image = {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}
    body = request({"role": "system", "content": LONG}, user(""), model=MODEL)
    assert placed(body) == {"placed": ["system"], "client": 0}
    body = request(
        {"role": "system", "content": LONG},
        {"role": "user", "content": [{"type": "text", "text": "see"}, image]},
        model=MODEL,
    )
    out, report = with_breakpoints(ANTHROPIC, "anthropic", body)
    assert report == {"placed": ["system", "tail"], "client": 0}
    assert out["messages"][1]["content"][1] == {**image, "cache_control": EPHEMERAL}
    body = request(
        {"role": "system", "content": LONG},
        user("Hi."),
        {"role": "assistant", "content": [image]},
        model=MODEL,
    )
    assert marked_messages(body) == [0]


def test_below_the_minimum_nothing_is_placed_and_haiku_needs_twice_as_much() -> None:
    body = request({"role": "system", "content": LONG}, user("Hi."), model=MODEL)  # ~1,450
    assert placed(body) == {"placed": ["system", "tail"], "client": 0}
    haiku = {**body, "model": "anthropic/claude-3-5-haiku-20241022"}
    assert placed(haiku) == {"placed": [], "client": 0, "skipped": "short"}
    out, _ = with_breakpoints(ANTHROPIC, "anthropic", haiku)
    assert out is haiku


def test_a_mark_is_placed_only_where_its_prefix_reaches_the_minimum() -> None:
    """A short system prompt caches nothing by itself: the conversation's tail still does."""
    body = request({"role": "system", "content": "Be brief."}, user(LONG), model=MODEL)
    assert placed(body) == {"placed": ["tail"], "client": 0}


def test_an_image_counts_toward_the_minimum() -> None:
    """A short question about a screenshot is a prompt of ~1,600 tokens: cacheable."""
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    shot = [{"type": "text", "text": "What is wrong here?"}, image]
    body = request({"role": "system", "content": "Be brief."}, user(shot), model=MODEL)
    assert placed(body) == {"placed": ["tail"], "client": 0}


def test_a_section_the_client_marked_is_left_to_it() -> None:
    """A mark on the first tool: the client chose how to cache the tools, so the last one gets
    none from us; its system prompt and tail still do."""
    tools = _tools()
    tools[0] = {**tools[0], "cache_control": EPHEMERAL}
    body = request({"role": "system", "content": LONG}, user("Hi."), model=MODEL, tools=tools)
    out, report = with_breakpoints(ANTHROPIC, "anthropic", body)
    assert report == {"placed": ["system", "tail"], "client": 1}
    assert "cache_control" not in out["tools"][1] and out["tools"][0] is tools[0]


def test_ours_never_go_before_a_clients_long_ttl_mark() -> None:
    """Anthropic refuses a 1-hour mark after a 5-minute one: with the client's 1-hour mark on
    the previous tail, ours can only follow it (the tail)."""
    long_lived = {"type": "ephemeral", "ttl": "1h"}
    body = request(
        {"role": "system", "content": LONG},
        {"role": "user", "content": [{"type": "text", "text": "Go.", "cache_control": long_lived}]},
        assistant(None, call("c1", command="ls")),
        result("c1", "a"),
        model=MODEL,
        tools=_tools(),
    )
    assert placed(body) == {"placed": ["tail"], "client": 1}
    short_lived = copy.deepcopy(body)
    short_lived["messages"][1]["content"][0]["cache_control"] = {"type": "ephemeral", "ttl": "5m"}
    assert placed(short_lived) == {"placed": ["tools", "system", "tail"], "client": 1}


def test_marks_the_client_put_where_litellm_drops_them_still_count() -> None:
    """A message-level mark on list content never reaches Anthropic, but counting it keeps the
    total within four whatever litellm carries; so do marks on tool calls and functions."""
    tools = _tools()
    tools[1] = {**tools[1], "function": {**tools[1]["function"], "cache_control": EPHEMERAL}}
    marked_call = {**call("c1", command="ls"), "cache_control": EPHEMERAL}
    body = request(
        {"role": "system", "content": [{"type": "text", "text": LONG}], "cache_control": EPHEMERAL},
        user("Go."),
        assistant(None, marked_call),
        result("c1", "a"),
        model=MODEL,
        tools=tools,
    )
    assert placed(body) == {"placed": ["tail"], "client": 3}
