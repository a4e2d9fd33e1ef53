"""A Messages client bridged to Gemini, then switched back to a Claude model
(``proxy.upstream.thinking_signatures``): the thinking blocks the bridge answered with are marked
as another provider's, given back unmarked to the bridge, and never sent to Anthropic, whose API
refuses an unsigned or foreign-signed block with a 400 on every retry. A scripted Gemini and
Anthropic upstream on loopback, a live proxy in process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.upstream.thinking_signatures import MARK, verifiable
from tests.conftest import in_process, proxy_settings
from tests.proxy.upstream.test_bridge_stream_open import KEY, fresh_clients  # noqa: F401
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"  # litellm on httpx, as the other bridge tests
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)
SIGNATURE = "CiQBfakeGeminiThoughtSignature=="
THOUGHT = {"text": "pondering", "thought": True, "thoughtSignature": SIGNATURE}
USAGE = {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7}


def _gemini_answer(stream: bool) -> Reply:
    first = {"candidates": [{"content": {"role": "model", "parts": [THOUGHT]}, "index": 0}]}
    answer = {"content": {"role": "model", "parts": [{"text": "Hi"}]}, "finishReason": "STOP"}
    last = {"candidates": [answer], "usageMetadata": USAGE}
    if not stream:
        whole = {**last, "candidates": [{**last["candidates"][0],
                 "content": {"role": "model", "parts": [THOUGHT, {"text": "Hi"}]}}]}  # fmt: skip
        return Reply.json(whole)
    data = b"".join(b"data: " + orjson.dumps(e) + b"\r\n\r\n" for e in (first, last))
    return Reply(200, [("content-type", "text/event-stream")], data)


def _settings(edge: EdgeUpstream) -> Any:
    upstreams = [
        {"name": "gem", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url},
        {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url},
    ]
    return proxy_settings(edge.base_url, upstreams=upstreams)


def _thinking_of(r: Any, stream: bool) -> list[dict[str, Any]]:
    """The thinking blocks of a Messages answer, a stream's put together."""
    if not stream:
        return [b for b in r.json()["content"] if b["type"] == "thinking"]
    blocks: dict[int, dict[str, Any]] = {}
    for line in r.text.splitlines():
        if not line.startswith("data:"):
            continue
        event = orjson.loads(line[5:])
        if event["type"] == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif event["type"] == "content_block_delta":
            delta, block = event["delta"], blocks[event["index"]]
            if delta["type"] == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = block.get("signature", "") + delta["signature"]
    return [b for b in blocks.values() if b["type"] == "thinking"]


@pytest.mark.parametrize("stream", [False, True])
async def test_switching_from_a_bridged_gemini_back_to_claude(
    tmp_path: Path,
    edge: EdgeUpstream,
    fresh_clients: None,  # noqa: F811
    stream: bool,
) -> None:
    ask = [{"role": "user", "content": "hi"}]
    headers = {"x-api-key": KEY}
    body = {"model": "gemini-2.5-flash", "messages": ask, "max_tokens": 256, "stream": stream}
    async with in_process(_settings(edge), str(tmp_path / "db")) as c:
        edge.reply = _gemini_answer(stream)
        r = await c.post("/v1/messages", json=body, headers=headers)
        assert r.status_code == 200, r.text
        (thinking,) = _thinking_of(r, stream)
        # another provider's, marked; litellm's stream drops Gemini's (Claude Code's case)
        assert thinking["signature"] == ("" if stream else MARK + SIGNATURE)
        unsigned = {"type": "thinking", "thinking": "earlier", "signature": ""}
        turn = {
            "role": "assistant",
            "content": [unsigned, thinking, {"type": "text", "text": "Hi"}],
        }
        history = [*ask, turn, {"role": "user", "content": "and now?"}]

        # back on Gemini: no mark reaches it (litellm sends no thought signature back)
        edge.reply = _gemini_answer(False)
        again = {"model": "gemini-2.5-flash", "messages": history, "max_tokens": 256}
        r = await c.post("/v1/messages", json=again, headers=headers)
        assert r.status_code == 200, r.text
        sent = orjson.dumps(edge.last.json()).decode()
        assert MARK not in sent and "pondering" in sent

        # on Claude: neither block goes (Anthropic: "Invalid `signature` in `thinking` block")
        edge.reply = Reply.json(anthropic_message("Sure"))
        thinking_on = {"type": "enabled", "budget_tokens": 1024}
        claude = {"model": "claude-sonnet-4-5", "messages": history, "max_tokens": 2048,
                  "thinking": thinking_on}  # fmt: skip
        r = await c.post("/v1/messages", json=claude, headers=headers)
        assert r.status_code == 200, r.text
        seen = edge.last.json()
        assert seen["messages"][1]["content"] == [{"type": "text", "text": "Hi"}]
        assert seen["thinking"] == thinking_on  # not the turn in progress: thinking stays on


SIGNED = {"type": "thinking", "thinking": "mine", "signature": "EqQBCkgIARABGAIiQAnthropic"}


def _body(*messages: Any, **extra: Any) -> bytes:
    return orjson.dumps({"model": "claude-sonnet-4-5", "max_tokens": 2048,
                         "messages": list(messages), **extra})  # fmt: skip


def test_a_history_anthropic_signed_goes_byte_for_byte() -> None:
    body = _body(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [SIGNED, {"type": "text", "text": "yo"}]},
        {"role": "user", "content": "ok"},
    )
    assert verifiable(body) is body


def test_the_turn_in_progress_losing_its_thinking_goes_with_thinking_disabled() -> None:
    """Anthropic refuses a turn in progress (its tool results being sent) whose first assistant
    message does not start with thinking while thinking is on ("a final assistant message must
    start with a thinking block"): that request goes with thinking disabled, without any thinking
    block and without the edits that clear thinking."""
    foreign = {"type": "thinking", "thinking": "x", "signature": MARK + SIGNATURE}
    call = {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}
    later = {**call, "id": "toolu_2"}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}
    edits = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"},
                       {"type": "clear_tool_uses_20250919"}]}  # fmt: skip
    body = _body(
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": [foreign, call]},
        {"role": "user", "content": [result]},
        thinking={"type": "adaptive"},
        context_management=edits,
    )
    out = orjson.loads(verifiable(body))
    assert out["messages"][1]["content"] == [call]
    assert out["thinking"] == {"type": "disabled"}
    assert out["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}
    # two rounds into the turn: its first message is the one that must start with thinking
    body = _body(
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": [foreign, call]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": [SIGNED, later]},
        {"role": "user", "content": [{**result, "tool_use_id": "toolu_2"}]},
        thinking={"type": "adaptive"},
    )
    out = orjson.loads(verifiable(body))
    assert out["thinking"] == {"type": "disabled"}
    assert [m["content"] for m in out["messages"][1::2][:2]] == [[call], [later]]
    # its first message kept its own thinking: thinking stays on, the foreign block goes
    body = _body(
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": [SIGNED, call]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": [foreign, later]},
        {"role": "user", "content": [{**result, "tool_use_id": "toolu_2"}]},
        thinking={"type": "adaptive"},
    )
    out = orjson.loads(verifiable(body))
    assert out["thinking"] == {"type": "adaptive"}
    assert out["messages"][1]["content"][0] == SIGNED and out["messages"][3]["content"] == [later]


def test_a_null_signature_goes_and_a_missing_one_with_it() -> None:
    """litellm writes a provider's reasoning as a thinking block with ``"signature": null``: a
    400 at Anthropic, as an empty one is; a block without a signature goes with it (read where
    the body is parsed)."""
    null = {"type": "thinking", "thinking": "x", "signature": None}
    bare = {"type": "thinking", "thinking": "y"}
    body = _body(
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [null, bare, {"type": "text", "text": "hi"}]},
        {"role": "user", "content": "next"},
    )
    out = orjson.loads(verifiable(body))
    assert out["messages"][1]["content"] == [{"type": "text", "text": "hi"}]


def test_a_prefill_of_nothing_but_unverifiable_thinking_is_left_empty() -> None:
    body = _body(
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": ""}]},
    )
    assert orjson.loads(verifiable(body))["messages"][1]["content"] == []


def test_an_empty_redacted_block_goes_and_a_full_one_stays() -> None:
    body = _body(
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "redacted_thinking", "data": ""},
                {"type": "redacted_thinking", "data": "EmwKAh"},
                {"type": "text", "text": "yo"},
            ],
        },
    )
    out = orjson.loads(verifiable(body))
    assert [b.get("data") for b in out["messages"][1]["content"]] == ["EmwKAh", None]


async def test_a_bridged_tool_loop_without_its_thinking_goes_without_thinking(
    tmp_path: Path,
    edge: EdgeUpstream,
) -> None:
    """A Responses client switched to a Claude model mid tool loop, reasoning asked for: its
    history holds the call and its output but no thinking of Anthropic's, which Anthropic refuses
    while thinking is on ("a final assistant message must start with a thinking block") on every
    retry; litellm (``modify_params``) sends that request without thinking."""
    edge.reply = Reply.json(anthropic_message("ok"))
    upstream = {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url}
    tool = {"type": "function", "name": "shell", "parameters": {"type": "object"}}
    items = [
        {"role": "user", "content": "list the files"},
        {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.py"},
    ]
    body = {"model": "claude-sonnet-4-5", "input": items, "tools": [tool],
            "reasoning": {"effort": "medium"}}  # fmt: skip
    async with in_process(
        proxy_settings(edge.base_url, upstreams=[upstream]), str(tmp_path / "db")
    ) as c:
        r = await c.post("/v1/responses", json=body, headers={"x-api-key": KEY})
    assert r.status_code == 200, r.text
    sent = edge.last.json()
    assert sent["messages"][1]["content"][0]["type"] == "tool_use"
    assert "thinking" not in sent


async def test_anthropic_through_litellm_is_sent_nothing_it_cannot_verify(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    """A ``litellm`` upstream whose provider is Anthropic gets the history as Anthropic's own
    API would: no marked or unsigned thinking block."""
    edge.reply = Reply.json(anthropic_message("ok"))
    upstream = {"name": "claude", "kind": "litellm", "provider": "anthropic",
                "match": ["claude-*"], "base_url": edge.url}  # fmt: skip
    foreign = {"type": "thinking", "thinking": "pondering", "signature": MARK + SIGNATURE}
    history = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": [foreign, {"type": "text", "text": "Hi"}]},
               {"role": "user", "content": "and now?"}]  # fmt: skip
    body = {"model": "claude-sonnet-4-5", "messages": history, "max_tokens": 256}
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post("/v1/messages", json=body, headers={"x-api-key": KEY})
    assert r.status_code == 200, r.text
    sent = orjson.dumps(edge.last.json()).decode()
    assert "pondering" not in sent and SIGNATURE not in sent
