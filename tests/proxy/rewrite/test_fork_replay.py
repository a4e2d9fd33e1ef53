"""What was forwarded stays forwarded across a session's forks (``proxy.rewrite.lineage``): a
block placed in a history is the provider's cached prefix, and a later request holding that
history replays it byte for byte. A sibling of the last request (its last turn edited or
regenerated, two calls from one context) lost every injected block, and a conversation's tip was
evicted by a few one-turn side calls under its name: either re-billed the prompt from the block
on, unrecorded as a compaction."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.rewrite.engine import Engine
from tests.proxy.tenancy.conversations import PROTOCOLS, Step
from tests.proxy.tenancy.test_forks import (
    ALPHA,
    Agent,
    agent,
    branch,
    conversation_of,
    engine,  # noqa: F401  (the fixture)
)

HEADERS = {"x-session-id": "one-name"}


def _blocks(conversation: list[Any]) -> int:
    return str(conversation).count("<ctxproxy-context")


async def _forwarded(a: Agent, steps: list[Step]) -> list[Any]:
    return list(conversation_of((await a.send(steps, HEADERS)).body))


@pytest.mark.parametrize("proto", PROTOCOLS)
async def test_a_sibling_of_the_last_request_replays_the_shared_historys_blocks(
    engine: Engine,  # noqa: F811
    proto: str,
    request: pytest.FixtureRequest,
) -> None:
    a = agent(engine, proto, request)
    history = branch("alpha", ALPHA)  # its last turn asks about the folder: a block answers
    first = await _forwarded(a, history)
    assert _blocks(first) == 1
    done = [*history, ("said", "Deleted it.")]
    one = await _forwarded(a, [*done, ("user", "Thanks. Now list the Desktop.")])
    other = await _forwarded(a, [*done, ("user", "Thanks. Now list the Documents folder.")])
    assert one[: len(first)] == first
    assert other[: len(first)] == first  # the edited last turn: the history as forwarded


@pytest.mark.parametrize("proto", PROTOCOLS)
async def test_one_turn_side_calls_under_the_name_leave_the_conversations_blocks(
    engine: Engine,  # noqa: F811
    proto: str,
    request: pytest.FixtureRequest,
) -> None:
    a = agent(engine, proto, request)
    history = branch("alpha", ALPHA)
    first = await _forwarded(a, history)
    assert _blocks(first) == 1
    for turn in range(3):
        for k in range(6):  # a title, a topic check, a quota probe … each its own conversation
            await _forwarded(a, [("user", f"Side question {turn}.{k}: one word, please.")])
        history = [*history, ("said", f"Done {turn}."), ("user", f"Go on with step {turn}.")]
        now = await _forwarded(a, history)
        assert now[: len(first)] == first
