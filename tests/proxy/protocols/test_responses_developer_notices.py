"""A Responses input ending with a ``developer`` message after the user's prompt (Codex sends its
permissions and instructions as developer messages): the resolved reference goes on the prompt,
and the developer message stays last, the client's own item."""

from __future__ import annotations

from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_responses_adapter import (
    body,
    call,
    engine,  # noqa: F401  (the fixture)
    msg,
    output,
    rewrite,
    same,
)


async def test_the_block_goes_on_the_prompt_before_a_trailing_developer_message(
    engine: Engine,  # noqa: F811
) -> None:
    head = [
        msg("developer", "You are Codex."),
        msg("user", "make a folder"),
        call("call_1", "mkdir -p /w/demo123"),
        output("call_1"),
        msg("assistant", "Created."),
    ]
    await rewrite(engine, body(*head[:4]), 1000.0)
    prompt = msg("user", "delete the folder you just created")
    notice = msg("developer", "<permissions instructions>sandbox: workspace-write")
    out = await rewrite(engine, body(*head, prompt, notice), 1010.0)
    items = out.body["input"]
    assert len(items) == 7 and same(items[-1], notice), items[-1]
    said = items[-2]
    assert said["id"] == prompt["id"] and said["content"][0] == prompt["content"][0]
    assert "/w/demo123" in said["content"][-1]["text"], said
