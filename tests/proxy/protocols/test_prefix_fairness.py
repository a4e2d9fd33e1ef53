"""The prefix memories (``prefix_memory.PrefixMemory``: the Anthropic and Responses adapters'
snapshots; ``gemini_prefix.LoweredMemory``: the Gemini adapter's) are shared by every principal
and bounded by sessions and bytes: over a bound, the principal holding most loses its least
recently kept snapshot, so one principal's stream of new sessions (or of large snapshots) pushes
out its own, never another's while it holds more (whose next request would walk its whole
conversation again: 2.5 ms a turn became 11–15 ms). And a snapshot serves its own principal's
session only: another principal sending the same conversation under the same session name reuses
nothing."""

from __future__ import annotations

import contextvars
import copy
from collections.abc import Callable
from typing import Any, TypeVar

from proxy.protocols.anthropic import AnthropicAdapter
from proxy.protocols.base import Lowered
from proxy.protocols.gemini_lower import lower_contents
from proxy.protocols.gemini_prefix import LoweredMemory
from proxy.protocols.prefix_memory import PrefixMemory
from rules.memo_scope import enter_scope
from tests.proxy.protocols.test_gemini_adapter import body as gemini_body
from tests.proxy.protocols.test_gemini_adapter import call, model, response
from tests.proxy.protocols.test_gemini_adapter import user as gemini_user

T = TypeVar("T")


def as_principal(principal: str, fn: Callable[[], T]) -> T:
    """``fn()`` run as one of ``principal``'s requests (its memo scope: ``rules.memo_scope``)."""

    def run() -> T:
        enter_scope(principal)
        return fn()

    return contextvars.copy_context().run(run)


def conversation(n: int, topic: str = "the parser") -> dict[str, Any]:
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"step {i} on {topic}: " * 8}
        for i in range(n)
    ]
    return {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages}


def lower(adapter: AnthropicAdapter, principal: str, name: str, body: dict[str, Any]) -> Lowered:
    session = f"{principal}/{name}"
    return as_principal(principal, lambda: adapter.lower(copy.deepcopy(body), session))


def test_a_flood_of_new_sessions_evicts_the_flooders_own_snapshots() -> None:
    memory = PrefixMemory(max_sessions=8, max_bytes=100_000)
    memory.put(("tenant-b/conv", b"first"), "b's", 1_000)
    for i in range(300):
        memory.put((f"tenant-a/s{i}", b"first"), f"a's {i}", 10)
    assert memory.get(("tenant-b/conv", b"first")) == "b's"
    assert len(memory) == 8
    assert memory.get(("tenant-a/s299", b"first")) == "a's 299"  # a's newest 7 are kept
    assert memory.get(("tenant-a/s292", b"first")) is None


def test_a_flood_of_large_snapshots_evicts_the_flooders_own() -> None:
    memory = PrefixMemory(max_sessions=256, max_bytes=10_000)
    memory.put(("tenant-b/conv", b"first"), "b's", 2_000)
    for i in range(50):
        memory.put((f"tenant-a/s{i}", b"first"), f"a's {i}", 2_400)
    assert memory.get(("tenant-b/conv", b"first")) == "b's"
    assert memory.held_bytes <= 10_000
    # the principal holding most loses, whoever it is: b's many sessions go before a's one
    memory = PrefixMemory(max_sessions=4, max_bytes=100_000)
    memory.put(("tenant-a/only", b"first"), "a's", 10)
    for i in range(10):
        memory.put((f"tenant-b/s{i}", b"first"), f"b's {i}", 10)
    assert memory.get(("tenant-a/only", b"first")) == "a's" and len(memory) == 4


def test_another_tenants_new_sessions_leave_a_conversations_reuse_alone() -> None:
    """Through the Anthropic adapter: b's conversation is reused over its next request however
    many sessions a opened between (more than the memory holds)."""
    adapter = AnthropicAdapter()
    convo = conversation(40)
    first = lower(adapter, "tenant-b", "conv", convo)
    assert first.state.shared == 0
    for i in range(adapter.prefixes.max_sessions + 44):
        lower(adapter, "tenant-a", f"s{i}", conversation(1, topic=f"job {i}"))
    grown = copy.deepcopy(convo)
    grown["messages"] += [
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "go on"},
    ]
    again = lower(adapter, "tenant-b", "conv", grown)
    assert again.state.shared == 40
    assert len(adapter.prefixes) == adapter.prefixes.max_sessions


def test_another_tenants_new_sessions_leave_a_gemini_lowering_alone() -> None:
    memory = LoweredMemory()
    turns = [gemini_user("task"), model(call("c1", "ls")), gemini_user(response("c1", "x" * 500))]
    first = gemini_body(*turns)
    memory.lowered(first, "tenant-b/conv", lower_contents)
    for n in range(200):  # past the 64 slots
        other = gemini_body(gemini_user(f"task {n}"))
        memory.lowered(other, f"tenant-a/s{n}", lower_contents)
    reused = memory.reused
    grown = {**first, "contents": [*first["contents"], model("done")]}
    memory.lowered(grown, "tenant-b/conv", lower_contents)
    assert memory.reused - reused == 3


def test_a_snapshot_serves_its_own_principal_only() -> None:
    """The same conversation under the same session name from another principal reuses nothing
    of the first one's snapshot (its key is the scoped session), where the first's own next
    request reuses all of it."""
    adapter = AnthropicAdapter()
    convo = conversation(20)
    grown = copy.deepcopy(convo)
    grown["messages"].append({"role": "assistant", "content": "done"})
    lower(adapter, "tenant-a", "conv", convo)
    theirs = lower(adapter, "tenant-b", "conv", grown)
    mine = lower(adapter, "tenant-a", "conv", grown)
    assert (theirs.state.shared, mine.state.shared) == (0, 20)
    assert not set(map(id, theirs.messages)) & set(map(id, mine.messages))
    # Gemini: the very same content objects, lowered for a and then for b, are lowered anew
    memory = LoweredMemory()
    contents = gemini_body(gemini_user("task"), model("sure"))
    memory.lowered(contents, "tenant-a/conv", lower_contents)
    memory.lowered(contents, "tenant-b/conv", lower_contents)
    assert memory.reused == 0
    memory.lowered(contents, "tenant-a/conv", lower_contents)
    assert memory.reused == 2
