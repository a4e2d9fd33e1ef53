"""Tier 3, longer sessions of the real CLIs under a budget small enough to force compactions:
each turn the model makes three calls at once (a large output, a command that fails, a read or a
patch), Claude Code or Codex runs them, and the next prompts resume the session. The scripted
upstream checks every forwarded body as the provider would (each call answered by a result in
the next turn, no result without its call, thinking and reasoning kept signed; consecutive turns
of one role Anthropic combines into one, and so they pass) and answers 400 to a broken one, which
fails the CLI's run.

Claude Code sends ``role: "system"`` messages inside ``messages`` (a notice after a truncated
read, the tools it defers); they are passed over, as the provider does.

Installed by ``bin/test`` (npm); without it these tests skip with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.agent_clis import Claude, Codex
from tests.support.agent_proxy import completed_rows
from tests.support.protocol_upstreams import Seen, Turn, custom_tool, text, thinking, tool

RESULTS = ("tool_result", "function_call_output", "custom_tool_call_output")


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def anthropic_problems(body: dict[str, Any]) -> list[str]:
    """What Anthropic's API would refuse in ``body``'s messages."""
    out: list[str] = []
    msgs = [m for m in body.get("messages") or [] if m.get("role") != "system"]
    for i, m in enumerate(msgs):
        blocks = _blocks(m)
        if any(b.get("type") == "text" and not b.get("text") for b in blocks):
            out.append(f"message {i} has an empty text block")
        if any(b.get("type") == "thinking" and not b.get("signature") for b in blocks):
            out.append(f"message {i} has an unsigned thinking block")
        uses = sorted(b["id"] for b in blocks if b.get("type") == "tool_use")
        after = _blocks(msgs[i + 1]) if i + 1 < len(msgs) else []
        answered = [b.get("tool_use_id") for b in after if b.get("type") == "tool_result"]
        if uses and (sorted(str(a) for a in answered) != uses or i + 1 == len(msgs)):
            out.append(f"message {i}'s calls {uses} are answered by {answered}")
        before = _blocks(msgs[i - 1]) if i else []
        called = {b.get("id") for b in before if b.get("type") == "tool_use"}
        for b in blocks:
            if b.get("type") == "tool_result" and b.get("tool_use_id") not in called:
                out.append(f"message {i} answers {b.get('tool_use_id')}, not called before it")
    return out


def responses_problems(body: dict[str, Any]) -> list[str]:
    """What the Responses API would refuse in ``body``'s input items."""
    out: list[str] = []
    called: set[str] = set()
    answered: set[str] = set()
    for n, item in enumerate(body.get("input") or []):
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call"):
            called.add(item["call_id"])
        elif kind in RESULTS:
            if item.get("call_id") not in called:
                out.append(f"item {n} answers {item.get('call_id')}, not called before it")
            answered.add(item.get("call_id"))
        elif kind == "reasoning" and not item.get("encrypted_content"):
            out.append(f"item {n} is reasoning without its encrypted_content")
    out += [f"call {c} has no output" for c in sorted(called - answered)]
    return out


def _refused(problems: list[str], seen: list[list[str]], anthropic: bool) -> Turn:
    seen.append(problems)
    message = "; ".join(problems)
    if anthropic:
        error = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    else:
        error = {"error": {"message": message, "type": "invalid_request_error"}}
    return Turn(status=400, error=error)


def _big_file(work: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    big = work / "big.txt"
    big.write_text("\n".join(f"line {i}: " + "x" * 60 for i in range(1500)))
    return big


def test_claude_code_parallel_calls_under_a_forcing_budget(
    agent_proxy,
    anthropic_upstream,
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    proxy = agent_proxy(pipeline={"on_rule_error": "skip", "budget_tokens": 30_000})
    work = tmp_path / "work"
    big = _big_file(work)
    refused: list[list[str]] = []

    def respond(seen: Seen) -> Turn:
        problems = anthropic_problems(seen.json)
        if problems:
            return _refused(problems, refused, anthropic=True)
        msgs = [m for m in seen.json["messages"] if m.get("role") != "system"]
        if not seen.json.get("stream") or any(
            b.get("type") == "tool_result" for b in _blocks(msgs[-1])
        ):
            return Turn([text("Done with that.")])  # a side request, or the calls' results
        n = len(msgs)
        return Turn(
            [
                thinking(f"look at it ({n})", f"sig-{n}"),
                text("Looking."),
                tool("Bash", command=f"head -800 {big}", description="Show it"),
                tool("Bash", command="ls /nonexistent-dir-zz", description="Fails"),
                tool("Read", file_path=str(big)),
            ]
        )

    anthropic_upstream.responder = respond
    claude = Claude(proxy.url, tmp_path / "home", work)
    for i in range(3):
        run = claude.run(f"turn {i}: look at big.txt", *(["--continue"] if i else []))
        assert run.returncode == 0 and "Done with that." in run.stdout, run.explain()
    assert refused == []
    rows = [r for r in completed_rows(proxy, 6) if r["stream"]]
    assert all(r["status"] == 200 for r in rows)
    assert any(r["report"]["prune"]["compacted"] for r in rows), "no compaction was forced"


def test_codex_parallel_calls_under_a_forcing_budget(
    agent_proxy,
    responses_upstream,
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    proxy = agent_proxy(pipeline={"on_rule_error": "skip", "budget_tokens": 12_000})
    work = tmp_path / "work"
    big = _big_file(work)
    (work / "a.py").write_text("x = 1\n")
    refused: list[list[str]] = []

    def respond(seen: Seen) -> Turn:
        problems = responses_problems(seen.json)
        if problems:
            return _refused(problems, refused, anthropic=False)
        items = seen.json["input"]
        if items and items[-1].get("type") in RESULTS:
            return Turn([text("Done.")])
        n = len(items)
        patch = f"*** Begin Patch\n*** Update File: {work}/a.py\n@@\n-x = 1\n+x = 2\n"
        patch += "*** End Patch\n"
        return Turn(
            [
                thinking(f"plan {n}", f"enc-{n}"),
                tool("exec_command", cmd=f"cat {big}"),
                tool("exec_command", cmd="ls /nonexistent-zz"),
                custom_tool("apply_patch", patch),
            ]
        )

    responses_upstream.responder = respond
    codex = Codex(proxy.base_url, tmp_path / "home", work)
    for i in range(4):
        run = codex.run(f"turn {i}: look", *(("resume", "--last") if i else ()))
        assert run.returncode == 0 and run.stdout.strip().endswith("Done."), run.explain()
    assert refused == []
    rows = completed_rows(proxy, 8)
    assert all(r["status"] == 200 for r in rows)
    assert any(r["report"]["prune"]["compacted"] for r in rows), "no compaction was forced"
