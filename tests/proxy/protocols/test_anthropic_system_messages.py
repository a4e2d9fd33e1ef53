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
    rewrite,
    same,
    text,
    user,
)

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
