"""Integers past 64 bits in a client's body (a call's argument, an id) are forwarded exactly:
orjson reads them as floats, so a body holding one is read again keeping them as written, and
what is re-serialised (a changed body, a rewritten call) still spells the same digits."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.body import parse_json
from proxy.protocols.body_memory import BodyMemory
from proxy.protocols.gemini import GEMINI
from proxy.protocols.validate import validate_anthropic
from proxy.rewrite.engine import Engine

BIG = "123456789012345678901234567890"


def raw_of(text: str) -> bytes:
    """``text`` without spaces, ``N`` standing for the integer."""
    return text.replace(" ", "").replace("N", BIG).encode()


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":123456789012345678901234567890}',
        b'{"a":[-123456789012345678901234567890,1.5]}',
        b'{"a":18446744073709551615,"b":-9223372036854775808}',
        b'{"a":1e+30,"b":{"c":[99999999999999999999]}}',
    ],
)
def test_a_body_is_written_back_as_it_was_read(raw: bytes) -> None:
    assert orjson.dumps(parse_json(raw)) == raw


def test_a_body_without_one_is_orjsons_own() -> None:
    body = parse_json(b'{"a":1,"b":[2.5,"x"]}')
    assert body == {"a": 1, "b": [2.5, "x"]}


def anthropic_raw(*extra: str) -> bytes:
    use = '{"type":"tool_use","id":"toolu_1","name":"fetch","input":{"id":N}}'
    result = '{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}'
    messages = [
        '{"role":"user","content":"fetch it"}',
        '{"role":"assistant","content":[' + use + "]}",
        '{"role":"user","content":[' + result + "," + result + "]}",  # doubled: repaired
        *extra,
    ]
    return raw_of('{"model":"claude-x","max_tokens":10,"messages":[' + ",".join(messages) + "]}")


async def test_a_changed_anthropic_body_keeps_the_integer(engine: Engine) -> None:
    body = parse_json(anthropic_raw())
    out = await engine.rewrite(body, {}, now=1000.0, adapter=ANTHROPIC, model="claude-x")
    assert out.body is not body  # the doubled result was repaired
    data = out.data if out.data is not None else orjson.dumps(out.body)
    assert f'"input":{{"id":{BIG}}}'.encode() in data


def test_a_rewritten_call_keeps_the_integer() -> None:
    body = parse_json(anthropic_raw())
    lowered = ANTHROPIC.lower(body)
    messages: list[Any] = []
    for m in lowered.messages:
        if m.get("tool_calls"):
            (call,) = m["tool_calls"]
            assert call["function"]["arguments"] == f'{{"id":{BIG}}}'
            fn = {**call["function"], "arguments": f'{{"id":{BIG},"page":2}}'}
            m = {**m, "tool_calls": [{**call, "function": fn}]}
        messages.append(m)
    fwd = ANTHROPIC.lift(body, lowered, messages)
    use = fwd["messages"][1]["content"][0]
    assert orjson.dumps(use["input"]) == f'{{"id":{BIG},"page":2}}'.encode()


def test_gemini_args_keep_the_integer_when_the_call_is_rewritten() -> None:
    raw = raw_of(
        '{"contents":[{"role":"user","parts":[{"text":"go"}]},'
        '{"role":"model","parts":[{"functionCall":{"id":"c1","name":"f","args":{"n":N}}}]},'
        '{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"f",'
        '"response":{"output":"ok"}}}]}]}'
    )
    body = parse_json(raw)
    lowered = GEMINI.lower(body)
    messages: list[Any] = []
    for m in lowered.messages:
        if m.get("tool_calls"):
            (call,) = m["tool_calls"]
            fn = {**call["function"], "arguments": f'{{"n":{BIG},"more":true}}'}
            m = {**m, "tool_calls": [{**call, "function": fn}]}
        messages.append(m)
    fwd = GEMINI.lift(body, lowered, messages)
    args = fwd["contents"][1]["parts"][0]["functionCall"]["args"]
    assert orjson.dumps(args) == f'{{"n":{BIG},"more":true}}'.encode()


def test_a_session_body_read_from_the_last_one_keeps_a_new_integer() -> None:
    memory = BodyMemory("messages", validate_anthropic)
    first = raw_of('{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"a"},'
                   '{"role":"assistant","content":"b"}]}')  # fmt: skip
    memory.parse(first, "s1")
    grown = first[:-2] + b',{"role":"user","content":[{"type":"text","text":"c","n":%s}]}]}' % (
        BIG.encode()
    )
    body = memory.parse(grown, "s1")
    assert orjson.dumps(body) == grown
