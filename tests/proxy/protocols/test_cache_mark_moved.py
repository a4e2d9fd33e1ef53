"""Claude Code marks its last turn for the cache (a one-block list with ``cache_control``) and,
once the mark moves on, resends that turn as a string. The block ctxproxy put on the turn must
come back where it was, byte for byte: the string is lowered as the one text block it stands
for. Before, the two lowered differently, the block was taken for lost and added again on the
tool result at the tail, and the prompt was re-billed from the turn on."""

from __future__ import annotations

from typing import Any

from proxy.protocols.anthropic import ANTHROPIC
from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_anthropic_adapter import assistant, body, result, text, tool_use

MARK = {"type": "ephemeral"}
ASK = "delete the folder you just created"


def _start() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "make a folder called build_out"},
        assistant(tool_use("toolu_1", "mkdir build_out")),
        {"role": "user", "content": [result("toolu_1", "")]},
        assistant(text("Made build_out.")),
    ]


async def test_a_turn_resent_as_a_string_keeps_its_block_in_place(engine: Engine) -> None:
    first = body(*_start(), {"role": "user", "content": [text(ASK, cache_control=MARK)]})
    out = await engine.rewrite(first, {}, now=1000.0, adapter=ANTHROPIC)
    asked = out.body["messages"][4]["content"]
    assert len(asked) == 2 and "<ctxproxy-context>" in asked[1]["text"]
    again = body(
        *_start(),
        {"role": "user", "content": ASK},  # the mark moved on
        assistant(tool_use("toolu_2", "rmdir build_out")),
        {"role": "user", "content": [result("toolu_2", "removed", cache_control=MARK)]},
    )
    out2 = await engine.rewrite(again, {}, now=1005.0, adapter=ANTHROPIC)
    sent = out2.body["messages"]
    assert sent[4]["content"] == [text(ASK), asked[1]]  # the same tokens, the mark aside
    assert "<ctxproxy-context>" not in str(sent[6])
    assert "lost" not in out2.report.get("inject", {})
