"""An orphan result (its call gone) ahead of the user's words in one message is made text by the
repair, and stays ahead of them: it was moved after the user's new prompt, so the model read a
stale tool output as the last thing said. Chat Completions keeps that order too."""

from __future__ import annotations

from proxy.rewrite.engine import Engine
from rules.messages import text_of
from tests.proxy.protocols.test_anthropic_adapter import body, result, rewrite, text


async def test_an_orphan_result_stays_before_the_users_words(engine: Engine) -> None:
    b = body(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [text("Hello.")]},
        {"role": "user", "content": [result("toolu_gone", "stale output"), text("Now delete it.")]},
    )
    out = await rewrite(engine, b)
    said = [text_of(m["content"]) for m in out.body["messages"][2:]]
    assert "stale output" in said[0] and said[-1] == "Now delete it."


async def test_an_orphan_results_tool_references_stay_out_of_the_user_message(
    engine: Engine,
) -> None:
    """A tool search's ``tool_reference`` blocks are valid inside a ``tool_result`` only: the
    orphan's moved into a user message made Anthropic answer 400."""
    refs = [{"type": "tool_reference", "tool_name": "mcp__x__y"}]
    b = body(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [text("Hello.")]},
        {"role": "user", "content": [result("toolu_gone", refs), text("go")]},
    )
    out = await rewrite(engine, b)
    kinds = [
        blk.get("type")
        for m in out.body["messages"][2:]
        for blk in (m["content"] if isinstance(m["content"], list) else [])
    ]
    assert "tool_reference" not in kinds
