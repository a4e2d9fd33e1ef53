"""A side conversation under its lead's session id (Claude Code runs its Agent/Task sub-agents
under the lead's ``x-claude-code-session-id``, with no ``X-Parent-Session-Id``) searches what
the lead made as a sub-agent's named parent would: "delete the folder I just created" in the
sub-agent's prompt found nothing, its branch starting empty. A fork of the conversation itself
(an edited or regenerated turn) keeps to its own branch."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.rewrite.engine import Engine, Rewritten
from tests.proxy.tenancy.conversations import PROTOCOLS, Step, body, render
from tests.proxy.tenancy.test_forks import ADAPTERS, ALPHA, engine, made, resolved  # noqa: F401

HEADERS = {"x-session-id": "one-cli-session"}
LEAD: list[Step] = [
    ("user", "Set up the project, then have a helper clean up."),
    *made("lead_1", ALPHA),
    ("said", "Made it. Starting a helper."),
    ("user", "Go on."),
]


async def _send(eng: Engine, proto: str, steps: list[Any], now: float) -> Rewritten:
    sent = body(proto, "lead", render(proto, steps))
    return await eng.rewrite(sent, HEADERS, now=now, adapter=ADAPTERS[proto], principal="p")


@pytest.mark.parametrize("proto", PROTOCOLS)
async def test_a_sub_agent_under_the_leads_session_finds_what_the_lead_made(
    engine: Engine,  # noqa: F811
    proto: str,
) -> None:
    await _send(engine, proto, LEAD, 1000.0)
    out = await _send(engine, proto, [("user", "SUBTASK: delete the folder I just created")], 1005)
    assert resolved(out) == [ALPHA]
    chain = out.report["references"][0]["chain"]
    assert chain[-1]["depth"] == 1 and chain[-1]["session"].endswith("(lead)")


@pytest.mark.parametrize("proto", PROTOCOLS)
async def test_an_edited_turn_keeps_to_its_branch(engine: Engine, proto: str) -> None:  # noqa: F811
    await _send(engine, proto, LEAD, 1000.0)
    edited = [
        LEAD[0],
        ("said", "What should the helper do?"),
        ("user", "delete the folder you created"),
    ]
    out = await _send(engine, proto, edited, 1005.0)
    assert resolved(out) == []  # the folder was made on the branch this one left


@pytest.mark.parametrize("proto", PROTOCOLS)
async def test_a_compacted_conversation_finds_what_it_made_before(
    engine: Engine,  # noqa: F811
    proto: str,
) -> None:
    """A client's own compaction (Claude Code's /compact or auto-compact, Codex's compact) goes
    on under the same session id with a summary in place of the history: no message of the old
    history is left, and "the folder you just created" found nothing, its branch starting
    empty."""
    await _send(engine, proto, LEAD, 1000.0)
    compacted = [
        ("user", "This session continues an earlier conversation. Summary: a folder was made."),
        ("said", "Understood."),
        ("user", "delete the folder you just created"),
    ]
    out = await _send(engine, proto, compacted, 1005.0)
    assert resolved(out) == [ALPHA]
    assert out.report["references"][0]["chain"][-1]["session"].endswith("(lead)")
