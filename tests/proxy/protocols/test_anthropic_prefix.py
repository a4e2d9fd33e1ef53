"""The Anthropic adapter's reuse of a session's previous request (``anthropic_prefix``): over a
session that grows as an agent's does, with edits in the middle of its history, a changed system
prompt, keys reordered and a value's type changed in an old message, and another session sending
the same start, the forwarded bytes and the report are exactly what an adapter that keeps nothing
gives; and the reuse does happen where the messages are shared."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import proxy.protocols.anthropic as anthropic_module
from proxy.protocols.anthropic import AnthropicAdapter
from proxy.protocols.anthropic_prefix import common_prefix, shared_bytes
from proxy.protocols.prefix_memory import PrefixMemory
from proxy.rewrite.engine import Engine
from proxy.settings import default_rule_names
from tests.proxy.protocols.test_anthropic_adapter import (
    assistant,
    body,
    result,
    text,
    thinking,
    tool_use,
    user,
)
from tests.support.twin_engines import through_both, twin_engines

# inject says the working set (every line, in view or not) on every request that changes it, so
# most requests are rewritten (at the tail) and the lifting's reuse is exercised on each
RULES = [
    {"name": n, **({"working_set_when": "always", "say_visible": True} if n == "inject" else {})}
    for n in default_rule_names()
]
SETTINGS = {
    "upstreams": [{"name": "a", "kind": "anthropic"}],
    "pipeline": {"budget_tokens": 16000},
    "rules": RULES,
}


def turn(i: int) -> list[dict[str, Any]]:
    """One agent step: a call (some with thinking) and its result (some long, to be pruned)."""
    lines = 120 if i % 3 == 0 else 3
    output = "".join(f"line {j} of file{i}.py: value = {i * j}\n" for j in range(lines))
    call = tool_use(f"toolu_{i:03d}", f"cat src/file{i}.py")
    hidden = thinking(f"step {i}") if i % 8 == 1 else {"type": "redacted_thinking", "data": f"x{i}"}
    first = [hidden, text(f"Reading file{i}.")] if i % 4 == 1 else []
    return [assistant(*first, call), user(result(f"toolu_{i:03d}", output))]


def conversation(steps: int, first: str = "Fix the failing tests in src/.") -> list[dict[str, Any]]:
    out = [user(text(first))]
    for i in range(steps):
        out += turn(i)
    return out


class Spy:
    """What the fast adapter reused at each request: shared client messages, reused groups."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.groups: list[int] = []
        real = anthropic_module.reuse_lifted

        def spy(*args: Any) -> tuple[int, int]:
            k, g = real(*args)
            if args[0].prefix is not None:  # the fast adapter's (the slow one keeps nothing)
                self.groups.append(g)
            return k, g

        monkeypatch.setattr(anthropic_module, "reuse_lifted", spy)


@pytest.fixture
async def engines(tmp_path: Path) -> Any:
    async with twin_engines(tmp_path, SETTINGS) as pair:
        yield pair


async def both(
    fast: Engine,
    slow: Engine,
    adapter: AnthropicAdapter,
    b: dict[str, Any],
    now: float,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    return await through_both(fast, slow, adapter, AnthropicAdapter, b, now, headers)


def growing(steps: range, history: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    for n in steps:
        yield history[: 1 + 2 * n]


async def test_a_growing_session_forwards_what_nothing_kept_forwards(
    engines: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow = engines
    spy = Spy(monkeypatch)
    adapter = AnthropicAdapter()
    history = conversation(40)
    now = 1000.0
    for messages in growing(range(20, 41), history):
        now += 5
        await both(fast, slow, adapter, body(*messages), now)
    # from the second request on, most of the conversation is the previous request's
    assert len(spy.groups) == 20
    # all but what follows a compaction (prune rewrote the middle), which is lifted again
    assert sum(g > 30 for g in spy.groups) >= 15, spy.groups
    snapshot = next(adapter.prefixes.snapshots())
    assert snapshot.lift is not None and len(snapshot.datas) == 81


async def test_edits_in_the_history_system_prompt_keys_and_types(
    engines: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow = engines
    spy = Spy(monkeypatch)
    adapter = AnthropicAdapter()
    history = conversation(30)
    now = 1000.0
    for messages in growing(range(10, 16), history):
        now += 5
        await both(fast, slow, adapter, body(*messages), now)
    msgs = copy.deepcopy(history[:33])

    # a tool result in the middle of the history rewritten
    msgs[10] = user(result("toolu_004", "something else entirely\n" * 50))
    now += 5
    await both(fast, slow, adapter, body(*msgs), now)
    assert 0 < spy.groups[-1] <= 10  # at most the messages before the edit

    # the same message again, its keys in another order (equal as dicts, not as bytes)
    call = msgs[7]["content"][-1]
    msgs[7] = assistant({"input": {"command": "cat src/file3.py"}, **call})
    msgs[7]["content"][0]["input"] = {"command": "cat src/file3.py", "description": "read it"}
    msgs = [*msgs[:7], msgs[7], *msgs[8:]]
    now += 5
    await both(fast, slow, adapter, body(*msgs), now)
    reordered = copy.deepcopy(msgs)
    inp = reordered[7]["content"][0]["input"]
    reordered[7]["content"][0]["input"] = dict(reversed(list(inp.items())))
    assert reordered == msgs and orjson.dumps(reordered) != orjson.dumps(msgs)
    now += 5
    got = await both(fast, slow, adapter, body(*reordered), now)
    assert spy.groups[-1] < 8
    assert got["messages"][7]["content"][0]["input"] == reordered[7]["content"][0]["input"]

    # a value's type changed, equal in Python (True == 1), not in JSON
    typed = copy.deepcopy(reordered)
    typed[4]["content"][0]["is_error"] = True
    now += 5
    await both(fast, slow, adapter, body(*typed), now)
    typed2 = copy.deepcopy(typed)
    typed2[4]["content"][0]["is_error"] = 1
    assert typed2 == typed
    now += 5
    await both(fast, slow, adapter, body(*typed2), now)

    # a changed system prompt: nothing of the output shared (it comes first)
    now += 5
    other = body(*typed2)
    other["system"][1]["text"] = "You are a careless agent."
    await both(fast, slow, adapter, other, now)
    assert spy.groups[-1] == 0

    # and growing again from there
    for extra in range(1, 4):
        now += 5
        grown = typed2 + [m for i in range(30, 30 + extra) for m in turn(i)]
        other = body(*grown)
        other["system"][1]["text"] = "You are a careless agent."
        await both(fast, slow, adapter, other, now)
    assert spy.groups[-1] > 10


async def test_another_session_with_the_same_start(
    engines: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow = engines
    Spy(monkeypatch)
    adapter = AnthropicAdapter()
    history = conversation(24)
    now = 1000.0
    for n in (8, 9, 10):
        for sid in ("a", "b"):
            now += 5
            messages = history[: 1 + 2 * n] if sid == "a" else history[: 1 + 2 * (n + 2)]
            await both(fast, slow, adapter, body(*messages), now, {"x-session-id": sid})
    # each session keeps its own previous request
    assert len(adapter.prefixes) == 2
    # a session that starts like another, without naming itself, is told apart by its content
    now += 5
    await both(fast, slow, adapter, body(*conversation(6, "Another task.")), now)
    assert len(adapter.prefixes) == 3


def test_a_wrong_snapshot_is_never_used() -> None:
    """Shared means equal bytes: an equal dict with its keys in another order, a True for a 1,
    and a message that cannot be serialised are not."""
    a = [b'{"a":1}', b'{"b":true}', b'{"c":2}']
    assert shared_bytes(a, [b'{"a":1}', b'{"b":true}', b'{"c":3}']) == 2
    assert shared_bytes(a, [b'{"a":1}', b'{"b":1}', b'{"c":2}']) == 1
    assert shared_bytes([None, *a], [None, *a]) == 0
    assert common_prefix(list(range(100)), [*range(70), -1, *range(71, 100)]) == 70
    assert common_prefix(list(range(64)), list(range(64))) == 64


def test_the_memory_is_bounded() -> None:
    memory = PrefixMemory(max_sessions=3, max_bytes=1000)
    for i in range(5):
        memory.put(i, f"s{i}", 100)
    assert len(memory) == 3 and memory.get(0) is None and memory.get(4) == "s4"
    memory.put(5, "big", 300)  # over a quarter of the bound: not kept
    assert memory.get(5) is None
    memory.put(4, "again", 200)
    assert memory.held_bytes == 400 and memory.get(4) == "again"
    for i in range(6, 10):
        memory.put(i, "x", 240)
    assert memory.held_bytes <= 1000


def with_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """As Claude Code sends them: a cache breakpoint on the last message's last block only (it
    moves with every request; the chat view does not show it)."""
    out = copy.deepcopy(messages)
    last = out[-1]
    if isinstance(last["content"], str):
        last["content"] = [text(last["content"])]
    last["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return out


async def test_what_the_chat_view_does_not_show_is_never_taken_from_the_last_request(
    engines: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message the rules changed (inject's block on the last one, replayed in place later)
    lowers the same after its breakpoint moved on, and its output hash is the same: it is still
    lifted from the client's current bytes, not from what was lifted last time."""
    fast, slow = engines
    spy = Spy(monkeypatch)
    adapter = AnthropicAdapter()
    sent = conversation(10)
    now = 1000.0
    for n in range(10, 22):
        now += 5
        sent = [*sent, *turn(n), user(text(f"Now step {n}: mkdir build{n} and run it."))]
        got = await both(fast, slow, adapter, body(*with_breakpoint(sent)), now)
        marks = [
            i
            for i, m in enumerate(got["messages"])
            for b in (m["content"] if isinstance(m["content"], list) else [])
            if isinstance(b, dict) and "cache_control" in b
        ]
        assert marks == [len(sent) - 1]
    assert sum(g > 10 for g in spy.groups) >= 5, spy.groups


def test_a_shared_prefix_s_parts_are_its_own() -> None:
    """The snapshot's tag index names each spec's position, and a tag of the previous request's
    messages past the shared ones names nothing in this request (``prefix.SharedParts``)."""
    adapter = AnthropicAdapter()
    history = conversation(4)
    n = len(history)
    first = adapter.lower(body(*history, user(text("a")), assistant(text("On it."))), "s")
    assert first.state.parts.get(str(n + 1)) is not None
    for extra in ([user(text("b"))], [user(text("b")), assistant(text("Done."))]):
        lowered = adapter.lower(body(*history, *extra), "s")
        snap = lowered.state.snapshot
        assert snap.index == {tag: pos for pos, tag in enumerate(snap.tags)}
        assert lowered.state.parts.get(f"{n}.0").index == n  # its text block's part
        stale = lowered.state.parts.get(str(n + 1))  # the first request's assistant turn, gone
        assert stale is None if len(extra) == 1 else stale.lowered["content"] == "Done."
