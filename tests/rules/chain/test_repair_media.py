"""The chain repair keeps a tool result's non-text parts (images, files), in order, in what it
writes from that result: a duplicate merged into the first result, an orphan kept as user text."""

from __future__ import annotations

from typing import Any

from rules.chain.repairs import repair_messages
from rules.messages import text_of
from tests.support.factories import assistant, shell, system, user

IMG_A = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
IMG_B = {"type": "image_url", "image_url": {"url": "data:image/png;base64,BBBB"}}


def tool(cid: str, *parts: Any) -> dict[str, Any]:
    content = [{"type": "text", "text": p} if isinstance(p, str) else p for p in parts]
    return {"role": "tool", "tool_call_id": cid, "content": content}


def test_a_merged_duplicate_keeps_its_image_after_its_text() -> None:
    messages = [system(), user("look"), assistant(None, shell("c1", "shot")),
                tool("c1", "first", IMG_A), tool("c1", "second", IMG_B)]  # fmt: skip
    out, reps = repair_messages(messages)
    assert [r["action"] for r in reps] == ["merged_into_first"]
    merged = out[3]["content"]
    assert [p for p in merged if p.get("type") == "image_url"] == [IMG_A, IMG_B]
    assert merged.index(IMG_A) < merged.index(IMG_B)
    assert "second" in text_of(merged)


def test_a_duplicate_that_is_only_an_image_is_not_dropped() -> None:
    messages = [system(), user("look"), assistant(None, shell("c1", "shot")),
                tool("c1", "first"), tool("c1", IMG_B)]  # fmt: skip
    out, _ = repair_messages(messages)
    assert IMG_B in out[3]["content"]


def test_an_identical_copy_is_still_dropped() -> None:
    messages = [system(), user("look"), assistant(None, shell("c1", "shot")),
                tool("c1", "same", IMG_A), tool("c1", "same", IMG_A)]  # fmt: skip
    out, reps = repair_messages(messages)
    assert [r["action"] for r in reps] == ["dropped_identical_copy"]
    assert out[3] is messages[3]


def test_an_orphan_result_keeps_its_images_in_order() -> None:
    messages = [system(), user("look"), tool("gone", "a screenshot", IMG_A, "caption", IMG_B)]
    out, reps = repair_messages(messages)
    assert [r["kind"] for r in reps] == ["orphan_result"]
    kept = out[2]
    assert kept["role"] == "user"
    assert [p for p in kept["content"] if p.get("type") == "image_url"] == [IMG_A, IMG_B]
    assert "a screenshot" in text_of(kept["content"])


def test_text_only_orphans_stay_a_string() -> None:
    messages = [system(), user("look"), {"role": "tool", "tool_call_id": "x", "content": "out"}]
    out, _ = repair_messages(messages)
    assert isinstance(out[2]["content"], str)
