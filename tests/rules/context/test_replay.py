"""The overlay's replay from the session's last one: the very bytes a full replay gives, on an
agent's growing conversation, through compactions, drops and a client that rewrites its
history; and only the edits past the shared prefix are applied again."""

from __future__ import annotations

import copy
from collections.abc import Hashable
from typing import Any

import orjson
import pytest

from rules.base import Message, SessionState
from rules.context import overlay, prune, replay
from tests.support.factories import TOKENS, assistant, call, ctx, result, user


def step(k: int) -> list[dict[str, Any]]:
    """One agent step: a run whose output is large every second step (capped when it appears)."""
    lines = 60 if k % 2 else 12
    body = "\n".join(f"g{k}.py line {i} " + "tok " * 8 for i in range(lines))
    return [
        assistant(f"step {k}", call(f"c{k}", "Bash", command=f"python gen.py g{k}")),
        result(f"c{k}", body),
    ]


def conversation(steps: int) -> list[dict[str, Any]]:
    return [user("Refactor the parser"), *[m for k in range(steps) for m in step(k)]]


class CountingMemo:
    """A ``RenderMemo`` that counts its lookups (each one an edit applied again)."""

    def __init__(self) -> None:
        self.kept: dict[Hashable, Message] = {}
        self.lookups = 0

    def get(self, key: Hashable) -> Message | None:
        self.lookups += 1
        return self.kept.get(key)

    def put(self, key: Hashable, message: Message) -> None:
        self.kept[key] = message


def session(
    messages: list[Message], budget: int | None, kept: dict[str, Any] | None, edit_at: int
) -> list[bytes]:
    """prune over each prefix ending on a tool result, as an agent sends them, with ``kept`` as
    the session's memo (None: a fresh one every request). At request ``edit_at`` the client
    resends an earlier message as a copy, at ``edit_at + 5`` with other content."""
    state, out = SessionState(), []
    sent = list(messages)
    for n, end in enumerate(range(3, len(messages) + 1, 2)):
        if n == edit_at:
            sent[5] = copy.deepcopy(sent[5])
        if n == edit_at + 5:
            sent[7] = {**sent[7], "content": sent[7]["content"] + "\n(trimmed)"}
        memo = kept if kept is not None else {}
        res = prune.apply(
            ctx(sent[:end], state=state, budget=budget, memo=memo),
            prune.Config(max_result_tokens=200),
        )
        state = res.state
        out.append(orjson.dumps(res.messages) + orjson.dumps(state.to_json()))
    return out


@pytest.mark.parametrize("budget_share", [None, 0.5, 0.2])
def test_replay_from_the_last_request_forwards_the_same_bytes(budget_share: float | None) -> None:
    messages = conversation(60)
    budget = None if budget_share is None else int(TOKENS.count_messages(messages) * budget_share)
    kept: dict[str, Any] = {}
    assert session(messages, budget, kept, edit_at=20) == session(messages, budget, None, 20)
    last = kept[replay.MEMO][0][1]
    assert last.positions, "the session's last replay applied edits"


def test_only_the_edits_past_the_shared_prefix_are_applied_again() -> None:
    messages = conversation(40)
    first = ctx(messages[:61], memo={})
    state = prune.apply(first, prune.Config(max_result_tokens=200)).state
    stored = state.get(prune.NAMESPACE)
    capped = len(stored["edits"])
    assert capped >= 10

    def render(
        sent: list[Message], kept: dict[str, Any] | None, memo: CountingMemo
    ) -> list[Message]:
        anchors = overlay.anchors(sent)
        ov = overlay.Overlay.load(stored, set(anchors))
        return replay.render(sent, anchors, ov, {}, TOKENS, 200, None, memo, kept=kept)

    kept: dict[str, Any] = {}
    render(messages[:61], kept, CountingMemo())
    grown = [*messages[:61], {"role": "user", "content": "go on"}]
    counted, full = CountingMemo(), CountingMemo()
    incremental = render(grown, kept, counted)
    assert incremental == render(grown, None, full)
    assert full.lookups == capped
    assert counted.lookups == 0  # every edit is in the shared prefix
    # an earlier message resent as another object: its edit is applied again, from there on
    changed = list(grown)
    target = kept[replay.MEMO][0][1].positions[-3]
    changed[target] = copy.deepcopy(changed[target])
    counted = CountingMemo()
    assert render(changed, kept, counted) == render(changed, None, CountingMemo())
    assert counted.lookups == 3


def test_other_edits_are_rendered_whole() -> None:
    messages = conversation(20)
    anchors = overlay.anchors(messages)
    tool_at = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    elided = {"action": "mask", "reason": "not needed", "tokens": "500"}
    one = overlay.Overlay({anchors[tool_at[0]]: elided})
    two = overlay.Overlay({anchors[tool_at[0]]: elided, anchors[tool_at[3]]: dict(elided)})
    kept: dict[str, Any] = {}
    for ov in (one, two, one):
        got = replay.render(messages, anchors, ov, {}, TOKENS, 200, kept=kept)
        assert got == overlay.render(messages, anchors, ov, {}, TOKENS, 200)
    # another cap: the same edits render other bytes
    capped = overlay.Overlay({anchors[tool_at[1]]: {"action": "cap", "reason": "over"}})
    small = replay.render(messages, anchors, capped, {}, TOKENS, 100, kept=kept)
    large = replay.render(messages, anchors, capped, {}, TOKENS, 100_000, kept=kept)
    assert small == overlay.render(messages, anchors, capped, {}, TOKENS, 100)
    assert large == overlay.render(messages, anchors, capped, {}, TOKENS, 100_000)
    assert small != large


def test_anchors_of_a_resent_prefix_are_taken_over_and_the_new_messages_hashed() -> None:
    messages = conversation(30)
    messages[20:20] = [user("continue"), user("continue"), user("continue")]  # repeated pairs
    kept: dict[str, Any] = {}
    for end in range(10, len(messages) + 1, 7):
        request = ctx(messages[:end], memo=kept)
        got = replay.anchors_in(request, request.messages)
        assert got == overlay.anchors(messages[:end])
        if end > 10:  # the previous request's messages were not hashed again
            assert len(request.hashes) == 7
    # a message resent as another object with other content: anchors from there on follow it
    changed = list(messages)
    changed[12] = {**changed[12], "content": "edited"}
    request = ctx(changed, memo=kept)
    assert replay.anchors_in(request, request.messages) == overlay.anchors(changed)
    assert len(request.hashes) == len(changed) - 12
