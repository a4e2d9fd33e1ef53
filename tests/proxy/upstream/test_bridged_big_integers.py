"""Integers past 64 bits through litellm's bridges (``proxy.protocols.exact_json.plain_loads``):
the native relays forward them exactly, but a bridge parsed its body with orjson, which reads them
as floats, and the provider was sent another number (a tool call's argument, a schema's bound).
Each bridge now hands litellm Python's own integers, which it writes as sent; a Responses answer
echoing one back (litellm copies the request's parameters into it) is written too, not a 500."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message, chat_completion

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"  # litellm on httpx, as the other bridge tests
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)
BIG = "123456789012345678901234567890"
HEADERS = {"content-type": "application/json", "x-api-key": "sk-test", "x-goog-api-key": "k"}
SCHEMA = '{"type":"object","properties":{"n":{"type":"integer","maximum":N}}}'


def upstreams(edge: EdgeUpstream) -> list[dict[str, Any]]:
    return [
        {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url},
        {"name": "oai", "kind": "openai", "match": ["gpt-*"], "base_url": edge.base_url},
    ]


CASES = {
    "messages to openai": (
        "/v1/messages",
        '{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"go"},'
        '{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"n":N}}]},'
        '{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}',
        '\\"n\\":N',
    ),
    "gemini to anthropic": (
        "/v1beta/models/claude-x:generateContent",
        '{"contents":[{"role":"user","parts":[{"text":"go"}]},'
        '{"role":"model","parts":[{"functionCall":{"name":"f","args":{"n":N}}}]},'
        '{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"r":1}}}]}]}',
        '"input":{"n":N}',
    ),
    "chat to anthropic": (
        "/v1/chat/completions",
        '{"model":"claude-x","messages":[{"role":"user","content":"go"}],'
        '"tools":[{"type":"function","function":{"name":"f","parameters":S}}]}',
        '"maximum":N',
    ),
    "responses to anthropic": (
        "/v1/responses",
        '{"model":"claude-x","input":"go","max_output_tokens":N,'
        '"tools":[{"type":"function","name":"f","parameters":S}]}',
        '"maximum":N',
    ),
}


# streamed too where the answer's stream echoes the request (Responses' events)
RUNS = [(c, s) for c in CASES for s in (False, True) if not s or CASES[c][0].startswith("/v1/res")]


@pytest.mark.parametrize(("case", "stream"), RUNS)
async def test_an_integer_past_64_bits_reaches_the_provider_as_sent(
    tmp_path: Path, edge: EdgeUpstream, case: str, stream: bool
) -> None:
    path, body, seen = CASES[case]
    raw = body.replace("S", SCHEMA).replace("N", BIG)
    if stream:
        raw = raw[:-1] + ',"stream":true}'
        from tests.support.anthropic_upstream import message_events, sse_reply

        edge.reply = sse_reply(message_events("ok"))
    else:
        edge.reply = Reply.json(chat_completion("ok") if "openai" in case else anthropic_message())
    settings = proxy_settings(edge.base_url, upstreams=upstreams(edge))
    async with in_process(settings, str(tmp_path / "db")) as client:
        got = await client.post(path, content=raw.encode(), headers=HEADERS)
    assert got.status_code == 200, got.text[:300]
    sent = edge.last.body.replace(b" ", b"")  # litellm's spacing aside
    assert seen.replace("N", BIG).encode() in sent, sent[:600]
    if path == "/v1/responses":
        assert BIG in got.text  # the answer's echo of the request, as sent
