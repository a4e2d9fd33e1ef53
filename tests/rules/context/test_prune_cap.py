"""prune's first-seen cap of large tool results looks again only at what the session's last list
did not show within the cap: the same forwarded bytes, state and report as looking at every
message, on growing sessions with compactions, resent copies, changed resends and a lost state."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import orjson
import pytest

from rules.base import Message, SessionState
from rules.context import prune
from tests.support.factories import TOKENS, assistant, call, ctx, result, user

CAP = 200  # tokens: every second step's result is over it


def step(k: int) -> list[Message]:
    lines = 60 if k % 2 else 12
    body = "\n".join(f"m{k}.py line {i} " + "word " * 8 for i in range(lines))
    return [
        assistant(f"step {k}", call(f"c{k}", "Bash", command=f"python gen.py m{k}")),
        result(f"c{k}", body),
    ]


def conversation(steps: int) -> list[Message]:
    return [user("Port the module"), *[m for k in range(steps) for m in step(k)]]


def session(
    messages: list[Message], budget: int | None, memo: dict[str, Any] | None
) -> list[bytes]:
    """prune over each prefix ending on a tool result, with ``memo`` as the session's memo (None:
    a fresh one every request, so every message is looked at). Along the way the client resends
    a large result as a copy, then a small result grown over the cap and a large one cut under it,
    and the session's state is lost once (its overlay with it; the memo stays)."""
    state, out = SessionState(), []
    sent = list(messages)
    for n, end in enumerate(range(3, len(messages) + 1, 2)):
        if n == 12:
            sent[4] = copy.deepcopy(sent[4])  # step 1's result, over the cap
        if n == 16:
            sent[6] = {**sent[6], "content": sent[6]["content"] * 6}  # step 2's: now over it
            sent[8] = {**sent[8], "content": "short now"}  # step 3's: now under it
        if n == 22:
            state = SessionState()
        res = prune.apply(
            ctx(sent[:end], state=state, budget=budget, memo={} if memo is None else memo),
            prune.Config(max_result_tokens=CAP),
        )
        state = res.state
        out.append(
            orjson.dumps(res.messages)
            + orjson.dumps(state.to_json())
            + orjson.dumps(res.report, option=orjson.OPT_SORT_KEYS)
        )
    return out


@pytest.mark.parametrize("budget_share", [None, 0.1])
def test_looking_at_new_results_only_gives_the_full_computation(budget_share: float | None) -> None:
    messages = conversation(40)
    budget = None if budget_share is None else int(TOKENS.count_messages(messages) * budget_share)
    kept: dict[str, Any] = {}
    incremental = session(messages, budget, kept)
    assert incremental == session(messages, budget, None)
    if budget is not None:
        assert b'"compacted":true' in b"".join(incremental), "a compaction ran along the way"
    # the lost state's results are capped again, as when first seen
    assert b'"action":"cap"' in incremental[22]


class Spy:
    """The test tokenizer, recording which message objects were counted."""

    def __init__(self) -> None:
        self.counted: list[int] = []

    def count_text(self, text: str) -> int:
        return TOKENS.count_text(text)

    def count_message(self, message: Message) -> int:
        self.counted.append(id(message))
        return TOKENS.count_message(message)

    def count_messages(self, messages: Sequence[Message]) -> int:
        return TOKENS.count_messages(messages)

    def count_tools(self, tools: Sequence[Any] | None) -> int:
        return TOKENS.count_tools(tools)


def test_results_the_last_list_showed_within_the_cap_are_not_counted_again() -> None:
    messages = conversation(20)
    kept: dict[str, Any] = {}
    first = prune.apply(ctx(messages[:31], memo=kept), prune.Config(max_result_tokens=CAP))
    spy = Spy()
    res = prune.apply(
        ctx(messages[:33], state=first.state, memo=kept, tokens=spy),
        prune.Config(max_result_tokens=CAP),
    )
    small_before = {
        id(m) for m in messages[:31] if m["role"] == "tool" and "line 59" not in m["content"]
    }
    assert small_before, "the session holds results within the cap"
    assert not small_before & set(spy.counted)
    assert id(messages[32]) in spy.counted  # the new result is
    # a resent copy is a new object: looked at again, and the decisions stay those of a full look
    changed = list(messages[:33])
    changed[2] = copy.deepcopy(changed[2])
    spy.counted.clear()
    again = prune.apply(
        ctx(changed, state=res.state, memo=kept, tokens=spy), prune.Config(max_result_tokens=CAP)
    )
    assert id(changed[2]) in spy.counted
    full = prune.apply(ctx(changed, state=res.state, memo={}), prune.Config(max_result_tokens=CAP))
    assert orjson.dumps(again.messages) == orjson.dumps(full.messages)
