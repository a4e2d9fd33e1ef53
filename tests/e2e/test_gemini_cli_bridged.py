"""Tier 3, a real agent on another provider's model: Gemini CLI 0.61.0 (``gemini -p --yolo -m
claude-…``) → a live proxy → litellm's Gemini bridge → a scripted Anthropic upstream that refuses
what Anthropic refuses: a tool_use id used twice, a tool_result that answers no tool_use of the
message before it. The model runs two shell commands at once; the CLI runs them, sends their
results, and the session is resumed for a second round: every call keeps its own id throughout
(the bridge named them all ``call_run_shell_command``, and the first round trip was refused).

Installed by ``bin/test`` (npm); without it these tests skip with the reason."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from typing import Any

import orjson

from tests.support.agent_clis import Gemini
from tests.support.gemini_proxy import gemini_settings
from tests.support.protocol_upstreams import (
    AnthropicUpstream,
    Seen,
    Turn,
    has_tool_result,
    text,
    tool,
)

MODEL = "claude-sonnet-4-5"


def pairing_break(messages: list[Any]) -> str | None:
    """What Anthropic's API says of a history whose tool ids do not pair, or None."""
    uses = [b["id"] for m in messages if isinstance(m.get("content"), list)
            for b in m["content"] if b.get("type") == "tool_use"]  # fmt: skip
    repeated = [cid for cid, n in Counter(uses).items() if n > 1]
    if repeated:
        return f"messages: `tool_use` ids must be unique: {repeated[0]}"
    for before, m in pairwise(messages):
        content = m.get("content") if isinstance(m.get("content"), list) else []
        results = [b["tool_use_id"] for b in content if b.get("type") == "tool_result"]
        called = before.get("content") if isinstance(before.get("content"), list) else []
        called_ids = {b["id"] for b in called if b.get("type") == "tool_use"}
        stray = [cid for cid in results if cid not in called_ids]
        if stray:
            return (f"messages: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{stray[0]}")  # fmt: skip
    return None


def _two_commands(first: str, second: str) -> Any:
    def respond(seen: Seen) -> Turn:
        broken = pairing_break(seen.json["messages"])
        if broken is not None:
            error = {"type": "error", "error": {"type": "invalid_request_error", "message": broken}}
            return Turn(status=400, error=error)
        if has_tool_result(seen):
            return Turn([text("Done.")])
        shell = "run_shell_command"
        return Turn([tool(shell, command=first), tool(shell, command=second)])

    return respond


def test_gemini_cli_on_a_claude_model_runs_parallel_calls_across_turns(
    gemini_proxy, gemini_upstream, anthropic_upstream: AnthropicUpstream, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    upstreams = [
        {"name": "gemini-fake", "kind": "gemini", "match": ["gemini-*"],
         "base_url": gemini_upstream.url},
        {"name": "claude-fake", "kind": "anthropic", "match": ["claude-*"],
         "base_url": anthropic_upstream.url},
    ]  # fmt: skip
    proxy = gemini_proxy(gemini_settings(gemini_upstream.url, upstreams=upstreams))
    work = tmp_path / "work"
    cli = Gemini(proxy.url, tmp_path / "home", work)

    anthropic_upstream.responder = _two_commands("touch one.txt", "touch two.txt")
    run = cli.run("make two files", "-m", MODEL)
    assert run.returncode == 0, run.explain()
    assert orjson.loads(run.stdout)["response"].strip().endswith("Done."), run.explain()
    assert (work / "one.txt").exists() and (work / "two.txt").exists()

    anthropic_upstream.responder = _two_commands("touch three.txt", "touch four.txt")
    run = cli.run("two more", "-m", MODEL, "--resume", "latest")
    assert run.returncode == 0, run.explain()
    assert (work / "three.txt").exists() and (work / "four.txt").exists()

    last = anthropic_upstream.messages[-1].json["messages"]
    uses = [b for m in last if isinstance(m["content"], list) for b in m["content"]
            if b["type"] == "tool_use"]  # fmt: skip
    assert len(uses) == 4 and len({b["id"] for b in uses}) == 4
    assert all(pairing_break(s.json["messages"]) is None for s in anthropic_upstream.messages)
