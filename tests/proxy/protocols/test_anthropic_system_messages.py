"""Claude Code's ``role: "system"`` messages inside ``messages`` (a beta it relies on): they are
the client's notices, not a user's or a model's turn. The shapes are those Claude Code 2.1.330
sends after its own ``/compact``: the environment notice emptied to ``[]`` (with its own
``output_config``), and the deferred-tools notice as the last message, after the prompt."""

from __future__ import annotations

from typing import Any

from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_anthropic_adapter import (
    assistant,
    body,
    result,
    rewrite,
    same,
    text,
    tool_use,
    user,
)

DELETE = "delete the folder you just created"
CC = {"type": "ephemeral"}
EFFORT = {"effort": "medium"}


def system(content: Any, **extra: Any) -> dict[str, Any]:
    return {"role": "system", "content": content, **extra}


async def test_an_emptied_system_notice_is_forwarded_as_sent(engine: Engine) -> None:
    """After ``/compact`` Claude Code sends its environment notice with no content: a system
    message is no turn, Anthropic's rule for a turn's empty text is not its, and the proxy's
    "(empty)" fill-in put words in the client's system prompt."""
    compacted = user("This session is being continued from a previous conversation. <summary>")
    emptied = system([], output_config=EFFORT)
    b = body(
        compacted,
        emptied,
        assistant(text("Created.")),
        user(text("<system-reminder>git</system-reminder>"), text("hello again")),
        system([text("The following deferred tools are now available.", cache_control=CC)]),
    )
    out = await rewrite(engine, b)
    fwd = out.body["messages"]
    assert same(fwd[1], emptied), fwd[1]
    assert not [r for r in out.report.get("repairs", []) if r.get("index") == 1]


def _made(first: dict[str, Any], env: dict[str, Any]) -> list[dict[str, Any]]:
    made = assistant(text("I'll."), tool_use("toolu_1", "mkdir -p /w/demo123 && echo made"))
    return [first, env, made, user(result("toolu_1", "made")), assistant(text("Created."))]


async def test_the_block_goes_on_the_prompt_not_after_a_trailing_system_notice(
    engine: Engine,
) -> None:
    """Claude Code puts its deferred-tools notice after the prompt, as the last message: the
    resolved reference belongs to the user's turn (the notice stays the client's own, last, and
    no second user turn follows it); the next request replays it there, the prefix unchanged."""
    env = system("# Environment\ncwd /w", output_config=EFFORT)
    first = user(text("<system-reminder>git</system-reminder>"), text("make a folder"))
    head = _made(first, env)
    await rewrite(engine, body(*head[:4]), 1000.0)
    prompt = user(text("<system-reminder>git</system-reminder>"), text(DELETE))
    notice = system([text("The following deferred tools are now available.", cache_control=CC)])
    out = await rewrite(engine, body(*head, prompt, notice), 1010.0)
    fwd = out.body["messages"]
    assert len(fwd) == 7 and same(fwd[-1], notice), fwd[-1]
    said = fwd[-2]["content"]
    assert said[:2] == prompt["content"] and "/w/demo123" in said[-1]["text"], said
    # the next request: the notice re-sent as a string (its breakpoint moved), the answer after
    answer = assistant(text("Deleting."), tool_use("toolu_2", "rmdir /w/demo123"))
    plain = system("The following deferred tools are now available.")
    later = body(*head, prompt, plain, answer, user(result("toolu_2", "ok")))
    nxt = await rewrite(engine, later, 1020.0)
    again = nxt.body["messages"]
    assert same(again[5], fwd[5]) and same(again[6], plain)


async def test_a_sub_agents_first_prompt_before_a_notice_stays_as_sent(engine: Engine) -> None:
    """A sub-agent's first request: its prompt (the first user message, never altered) and the
    environment notice after it; the block is a user message of its own after the prompt."""
    lead = {"x-session-id": "lead"}
    head = _made(user("make /w/demo123"), system("# Environment", output_config=EFFORT))
    await rewrite(engine, body(*head[:4]), 1000.0, lead)
    first = user(text("<system-reminder>git</system-reminder>"), text(DELETE))
    env = system([text("# Environment\ncwd /w", cache_control=CC)], output_config=EFFORT)
    sub = {"x-session-id": "sub", "x-parent-session-id": "lead"}
    out = await rewrite(engine, body(first, env), 1010.0, sub)
    fwd = out.body["messages"]
    assert same(fwd[0], first) and same(fwd[-1], env) and len(fwd) == 3
    assert "/w/demo123" in fwd[1]["content"][0]["text"]


async def test_a_system_notice_of_blank_text_only_is_emptied_not_filled(engine: Engine) -> None:
    """Its blank text blocks go (Anthropic refuses them); with none left it is empty, as Claude
    Code sends an emptied notice, not "(empty)" words in the system prompt; a breakpoint on
    one keeps the placeholder that holds it."""
    b = body(
        user("hi"),
        system([text(" ")], output_config=EFFORT),
        assistant(text("ok")),
        system([text("", cache_control=CC)]),
        user("go on"),
    )
    out = await rewrite(engine, b)
    fwd = out.body["messages"]
    assert fwd[1] == system([], output_config=EFFORT)
    assert fwd[3]["content"][0]["cache_control"] == CC
