"""A compaction that drops messages must not lose a cache breakpoint one of them held (a client
marking its last two user turns, as Anthropic's prompt-caching guide does): the mark goes to the
line standing for the dropped messages, so the request keeps the client's count of breakpoints
and its cached prefix still ends where the messages were."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proxy.protocols.anthropic import ANTHROPIC
from tests.support.strict_engine import strict_engine

MARK = {"type": "ephemeral"}


def _marks(body: dict[str, Any]) -> int:
    n = sum(1 for b in body.get("system") or [] if "cache_control" in b)
    for m in body["messages"]:
        for b in m["content"] if isinstance(m["content"], list) else []:
            n += "cache_control" in b
            inner = b.get("content") if b.get("type") == "tool_result" else None
            n += sum("cache_control" in x for x in inner) if isinstance(inner, list) else 0
    return n


def _session(rounds: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "tidy the logs folder"}]
    for i in range(rounds):
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Looking at part {i}."},
            {"type": "tool_use", "id": f"toolu_{i:02d}", "name": "Bash",
             "input": {"command": f"cat logs/part{i}.log"}}]})  # fmt: skip
        lines = "\n".join(f"{i}:{j} worker {j % 7} finished batch {j * 13}" for j in range(120))
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i:02d}", "content": lines}]})
    users = [m for m in messages if m["role"] == "user" and isinstance(m["content"], list)]
    for m in users[-2:]:  # the rolling marks: the last two user turns
        m["content"][-1]["cache_control"] = dict(MARK)
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are a careful agent.", "cache_control": MARK}],
        "messages": messages,
    }


async def test_a_dropped_message_s_breakpoint_goes_to_its_line(tmp_path: Path) -> None:
    async with strict_engine(tmp_path) as engine:
        body = _session(8)
        out = await engine.rewrite(body, {}, now=1000.0, adapter=ANTHROPIC, budget=2000)
    sent = out.body["messages"]
    line = next(m for m in sent if "earlier messages" in str(m["content"]))
    assert "toolu_06" not in str(sent)  # the turn holding the first mark was dropped
    assert _marks(out.body) == _marks(_session(8)) == 3
    assert isinstance(line["content"], list) and len(line["content"]) == 1
    assert line["content"][0]["cache_control"] == MARK
    assert line["content"][0]["text"].startswith("[ctxproxy: dropped ")


def _reminded(rounds: int) -> dict[str, Any]:
    """Claude Code's shape: each turn's results sent with a large `<system-reminder>` text after
    them in the same message, the rolling mark on that text (the message's last block)."""
    body = _session(rounds)
    users = [m for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)]
    for i, m in enumerate(users):
        result = m["content"][0]
        result.pop("cache_control", None)
        result["content"] = "\n".join(result["content"].splitlines()[:3])
        notes = "\n".join(f"note {i}.{j}: config key k{j} = value {j * 7}" for j in range(150))
        m["content"].append({"type": "text", "text": f"<system-reminder>{notes}</system-reminder>"})
    for m in users[-2:]:
        m["content"][-1]["cache_control"] = dict(MARK)
    return body


async def test_a_mark_on_blocks_dropped_beside_kept_results_goes_to_the_line(
    tmp_path: Path,
) -> None:
    async with strict_engine(tmp_path) as engine:
        out = await engine.rewrite(_reminded(8), {}, now=1000.0, adapter=ANTHROPIC, budget=4000)
    sent = out.body["messages"]
    assert "note 6.0" not in str(sent)  # the marked reminder of the turn before the last went
    kept = next(m for m in sent if m["role"] == "user" and "'toolu_06'" in str(m["content"]))
    assert [b["type"] for b in kept["content"]] == ["tool_result"]  # while its result stayed
    assert _marks(out.body) == _marks(_reminded(8)) == 3
    line = sent[sent.index(kept) + 1]
    assert "earlier messages" in str(line["content"])
    assert line["content"][0]["cache_control"] == MARK


def _orphaned(at: int) -> dict[str, Any]:
    """Four breakpoints, one on a result whose call the client no longer sends (the repair makes
    it text and keeps the mark there), in a message whose other result goes with its turn."""
    body = _session(8)
    users = [m for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)]
    gone = {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "stale output"}
    users[at]["content"].insert(0, {**gone, "cache_control": dict(MARK)})
    return body


async def test_a_carried_mark_never_adds_to_what_the_client_sent(tmp_path: Path) -> None:
    for at in (0, 5):
        async with strict_engine(tmp_path / str(at)) as engine:
            body = _orphaned(at)
            out = await engine.rewrite(body, {}, now=1000.0, adapter=ANTHROPIC, budget=3000)
        sent = out.body["messages"]
        assert "toolu_00" not in str(sent)  # a compaction ran
        repaired = next(m for m in sent if "toolu_gone" in str(m["content"]))
        assert repaired["content"][-1]["cache_control"] == MARK  # the mark kept where it was
        assert _marks(out.body) == _marks(_orphaned(at)) == 4  # none carried besides: never 5
