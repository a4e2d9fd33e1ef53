"""A tool result's images survive the chain repair through the adapters whose chat view reads a
result's text only (Anthropic ``tool_result`` blocks, Responses ``function_call_output`` parts):
a duplicate merged into the first result and an orphan kept as user text keep their non-text
blocks, in order, as the client sent them."""

from __future__ import annotations

from typing import Any

from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.base import TAG
from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine
from rules.messages import ABSORBED, MEDIA


def image(data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


IMG_A, IMG_B = image("AAAA"), image("BBBB")
USE = {"type": "tool_use", "id": "toolu_1", "name": "Screenshot", "input": {}}


def result(tid: str, text: str, img: dict[str, Any]) -> dict[str, Any]:
    content = [{"type": "text", "text": text}, img]
    return {"type": "tool_result", "tool_use_id": tid, "content": content}


def anthropic(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 10, "messages": list(messages)}


def forwarded(out: Any) -> bytes:
    data = repr(out.body).encode()
    assert TAG.encode() not in data and MEDIA.encode() not in data
    assert ABSORBED.encode() not in data
    return data


def images(blocks: list[Any]) -> list[Any]:
    return [b for b in blocks if b.get("type") in ("image", "input_image")]


async def test_anthropic_merged_duplicate_keeps_both_images(engine: Engine) -> None:
    body = anthropic(
        {"role": "user", "content": "take a screenshot"},
        {"role": "assistant", "content": [USE]},
        {
            "role": "user",
            "content": [result("toolu_1", "one", IMG_A), result("toolu_1", "two", IMG_B)],
        },
    )
    out = await engine.rewrite(body, {}, now=1000.0, adapter=ANTHROPIC, model="claude-x")
    forwarded(out)
    blocks = out.body["messages"][2]["content"]
    assert len(blocks) == 1 and blocks[0]["type"] == "tool_result"
    assert images(blocks[0]["content"]) == [IMG_A, IMG_B]


async def test_anthropic_orphan_keeps_its_image(engine: Engine) -> None:
    body = anthropic(
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "ok"},
        {
            "role": "user",
            "content": [
                result("toolu_gone", "the shot", IMG_A),
                {"type": "text", "text": "what is it?"},
            ],
        },
    )
    out = await engine.rewrite(body, {}, now=1000.0, adapter=ANTHROPIC, model="claude-x")
    forwarded(out)
    kinds = [r["kind"] for r in out.report["repairs"]]
    assert "orphan_result" in kinds
    blocks = [b for m in out.body["messages"][2:] for b in m["content"]]
    assert images(blocks) == [IMG_A]
    assert all(b["type"] != "tool_result" for b in blocks)


def output(cid: str, text: str, data: str) -> dict[str, Any]:
    parts = [{"type": "input_text", "text": text},
             {"type": "input_image", "image_url": f"data:image/png;base64,{data}"}]  # fmt: skip
    return {"type": "function_call_output", "call_id": cid, "output": parts}


async def test_responses_merged_duplicate_and_orphan_keep_their_images(engine: Engine) -> None:
    call = {"type": "function_call", "call_id": "call_1", "name": "shot", "arguments": "{}"}
    body = {
        "model": "gpt-5",
        "input": [
            {"role": "user", "content": "take a screenshot"},
            call,
            output("call_1", "one", "AAAA"),
            output("call_1", "two", "BBBB"),
            {"role": "assistant", "content": "done"},
            output("call_gone", "three", "CCCC"),
        ],
    }
    out = await engine.rewrite(body, {}, now=1000.0, adapter=RESPONSES, model="gpt-5")
    forwarded(out)
    items = out.body["input"]
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    assert len(outputs) == 1
    urls = [p["image_url"][-4:] for p in images(outputs[0]["output"])]
    assert urls == ["AAAA", "BBBB"]
    user_parts = [p for i in items[3:] if i.get("role") == "user" for p in i["content"]]
    assert [p["image_url"][-4:] for p in images(user_parts)] == ["CCCC"]
