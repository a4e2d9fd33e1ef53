"""The cache ledger's digest of a session's tools, taken over while the same object comes again:
each request's is its own tools' digest (changed, equal or the same object), and the bytes the
tools are charged leave the bound when the session does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proxy.attribution.ledger import CacheLedger
from proxy.attribution.probe import tools_digest, tools_digest_sized
from proxy.tokens import RequestTokens, TiktokenCounter
from rules.base import Context


@dataclass
class Outcome:
    messages: list[Any]
    hashes: list[str] = field(default_factory=lambda: ["00" * 10])
    history: list[str] = field(default_factory=lambda: ["00" * 10])
    report: dict[str, Any] = field(default_factory=dict)


def tool(description: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "shell", "description": description}}


def ctx(session: str, tools: list[Any] | None, now: float) -> Context:
    messages = [{"role": "user", "content": "hi"}]
    return Context(
        messages=messages, model="gpt-4o", tokens=RequestTokens(TiktokenCounter("gpt-4o")), now=now,
        session_id=session, tools=tools, original_messages=messages,
    )  # fmt: skip


def test_each_requests_tools_digest_is_its_own_tools() -> None:
    ledger = CacheLedger()
    tools = [tool("run a command")]
    for step in range(12):
        if step % 4 == 1:
            tools = [tool(f"run a command, take {step}")]  # changed: a new object
        elif step % 4 == 3:
            tools = [dict(t) for t in tools]  # equal, another object
        c = ctx("p/s", tools, 1000.0 + step)
        ledger.begin(c, Outcome(c.messages))
        sent = ledger._sessions.peek("p/s").sent
        assert sent is not None and sent.tools == tools_digest(tools)
    ledger.begin(ctx("p/s", None, 2000.0), Outcome([]))
    assert ledger._sessions.peek("p/s").sent.tools == b""  # type: ignore[union-attr]


def test_the_tools_bytes_are_charged_and_leave_with_their_session() -> None:
    big = [tool("x" * 5_000)]
    size = tools_digest_sized(big)[1]
    ledger = CacheLedger(max_bytes=3 * size)
    for n in range(10):
        c = ctx(f"p/s{n}", [tool(f"{n}" + "x" * 5_000)], 1000.0)
        ledger.begin(c, Outcome(c.messages))
        held = sum(s.size for s in ledger._sessions.values())
        assert ledger._sessions.held_bytes == held <= 3 * size
    assert len(ledger._sessions) < 10


def test_a_principal_holding_most_loses_its_own_sessions_first() -> None:
    """One tenant's sessions with large tools fill the bound: its own oldest go, another tenant's
    session (older than all of them) keeps its comparison."""
    size = tools_digest_sized([tool("x" * 5_000)])[1]
    ledger = CacheLedger(max_bytes=4 * size)
    victim = ctx("victim/s", [tool("read a file")], 1000.0)
    ledger.begin(victim, Outcome(victim.messages))
    for n in range(20):
        c = ctx(f"flood/s{n}", [tool(f"{n}" + "x" * 5_000)], 1001.0 + n)
        ledger.begin(c, Outcome(c.messages))
        held = sum(s.size for s in ledger._sessions.values())
        assert ledger._sessions.held_bytes == held <= 4 * size
    assert "victim/s" in ledger._sessions
    assert "flood/s19" in ledger._sessions and "flood/s0" not in ledger._sessions
    assert ledger._sessions.held_by("victim") == (1, ledger._sessions.peek("victim/s").size)


def test_a_principal_with_most_sessions_loses_its_oldest_at_the_session_bound() -> None:
    ledger = CacheLedger(max_sessions=5)
    first = ctx("victim/s", None, 1000.0)
    ledger.begin(first, Outcome(first.messages))
    for n in range(12):
        c = ctx(f"flood/s{n}", None, 1001.0 + n)
        ledger.begin(c, Outcome(c.messages))
    assert len(ledger._sessions) == 5 and "victim/s" in ledger._sessions
    assert ledger._sessions.held_by("victim") == (1, ledger._sessions.peek("victim/s").size)
    flooded = sum(ledger._sessions.peek(f"flood/s{n}").size for n in range(8, 12))  # type: ignore[union-attr]
    assert ledger._sessions.held_by("flood") == (4, flooded)
