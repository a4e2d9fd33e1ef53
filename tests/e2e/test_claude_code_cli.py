"""Tier 3, a real agent: Claude Code 2.1.330 (``claude -p``) → a live proxy → a scripted
Anthropic upstream. The model asks for ``mkdir`` through the ``Bash`` tool, Claude Code runs it
(the folder really exists), and ``claude -p --continue "delete the folder you just created"``
reaches the upstream with the folder's path named in a ``<ctxproxy-context>`` block.

Installed by ``bin/test`` (npm); without it these tests skip with the reason."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import orjson

from tests.support.agent_clis import CLAUDE_KEY, Claude
from tests.support.agent_proxy import (
    completed_rows,
    injected_block,
    last_user_side_text,
    section,
)
from tests.support.protocol_upstreams import (
    AnthropicUpstream,
    Turn,
    text,
    thinking,
    tool,
    tool_then_text,
)

MAKE = "make a folder for the build output"
SIGNATURE = "EqQBCkYIBxgCKkDsig-of-the-thinking-block-never-to-be-altered=="
DELETE = "delete the folder you just created"


def _script_mkdir(upstream: AnthropicUpstream, target: Path) -> None:
    upstream.responder = tool_then_text(
        tool("Bash", command=f"mkdir -p {target} && echo made", description="Create the folder"),
        "Created the folder.",
        preface="I'll create the folder.",
        lead=[thinking("The user wants a folder; use Bash.", SIGNATURE)],
    )


def _script_rmdir(upstream: AnthropicUpstream, target: Path) -> None:
    upstream.responder = tool_then_text(
        tool("Bash", command=f"rmdir {target} && echo removed", description="Remove it"),
        "Deleted the folder.",
    )


def _result(run) -> dict:  # type: ignore[no-untyped-def]
    assert run.returncode == 0, run.explain()
    return orjson.loads(run.stdout)


def test_scripted_upstream_alone_drives_a_tool_round_trip(anthropic_upstream, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The fake itself, without the proxy: Claude Code completes the scripted session."""
    target = tmp_path / "work" / "direct_folder"
    _script_mkdir(anthropic_upstream, target)
    claude = Claude(anthropic_upstream.url, tmp_path / "home", tmp_path / "work")
    out = _result(claude.run(MAKE))
    assert out["result"] == "Created the folder." and out["is_error"] is False
    assert target.is_dir()
    posts = anthropic_upstream.messages
    assert [p.query for p in posts] == ["beta=true", "beta=true"]
    assert posts[1].json["messages"][-1]["content"][0]["type"] == "tool_result"


def test_claude_code_through_ctxproxy_then_continue(
    agent_proxy,
    anthropic_upstream,
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    proxy = agent_proxy()
    target = tmp_path / "work" / "build_output"
    claude = Claude(proxy.url, tmp_path / "home", tmp_path / "work")

    # Turn 1: Bash mkdir runs for real, its result goes back through the proxy.
    _script_mkdir(anthropic_upstream, target)
    out = _result(claude.run(MAKE))
    assert out["result"] == "Created the folder."
    assert target.is_dir(), "the Bash tool did not run"
    first, second = anthropic_upstream.messages
    for seen in (first, second):
        assert seen.query == "beta=true"
        assert seen.header("x-api-key") == CLAUDE_KEY
        assert seen.header("anthropic-version") == "2023-06-01"
        assert "claude-code-20250219" in (seen.header("anthropic-beta") or "")
        assert seen.header("x-claude-code-session-id")
    think, _, tool_use = second.json["messages"][-2]["content"]
    # The thinking block comes back through the proxy as the upstream sent it.
    assert think == {
        "type": "thinking",
        "thinking": "The user wants a folder; use Bash.",
        "signature": SIGNATURE,
    }
    tool_result = second.json["messages"][-1]["content"][0]
    assert tool_use["type"] == "tool_use" and tool_use["name"] == "Bash"
    assert tool_result["type"] == "tool_result"
    assert tool_result["tool_use_id"] == tool_use["id"]
    assert str(target) in tool_use["input"]["command"]
    # metadata.user_id is forwarded as sent (a JSON string naming the session).
    assert orjson.loads(second.json["metadata"]["user_id"])["session_id"] == second.header(
        "x-claude-code-session-id"
    )

    rows = completed_rows(proxy, 2)
    assert [r["protocol"] for r in rows] == ["anthropic", "anthropic"]
    assert all(r["status"] == 200 for r in rows)
    assert all(r["model"] == first.json["model"] for r in rows)
    assert section(rows[0], "system") > 0 and section(rows[0], "tools") > 0
    assert section(rows[0], "user") > 0
    assert section(rows[1], "tool_calls") > 0 and section(rows[1], "tool_results") > 0
    assert rows[1]["completion_tokens"] == 9  # usage read from the relayed SSE
    assert rows[1]["cached_tokens"] == 13
    session = first.header("x-claude-code-session-id")
    assert rows[0]["session_id"] and rows[0]["session_id"] == rows[1]["session_id"]

    # Turn 2: resumed; the upstream is told which folder "the folder you just created" is.
    _script_rmdir(anthropic_upstream, target)
    out = _result(claude.run(DELETE, "--continue"))
    assert out["result"] == "Deleted the folder."
    resumed = anthropic_upstream.messages[2]
    assert resumed.header("x-claude-code-session-id") == session
    text = last_user_side_text(resumed)
    assert DELETE in text
    block = injected_block(text)
    assert str(target) in block, block
    assert not target.exists(), "the resumed session did not run rmdir"

    rows = completed_rows(proxy, 4)
    assert [r["protocol"] for r in rows] == ["anthropic"] * 4
    assert rows[2]["session_id"] == rows[0]["session_id"]
    # Claude Code writes compact JSON: its resumed session's bodies are read from the last ones
    metrics = httpx.get(proxy.url + "/metrics").text
    reused = re.search(r'ctxproxy_bodies_reused_total\{protocol="messages"\} (\S+)', metrics)
    assert reused is not None and float(reused.group(1)) >= 1, metrics
    assert section(rows[2], "injected", "after") > 0
    assert section(rows[2], "assistant") > 0 and section(rows[2], "tool_results") > 0
    # every request's cache line, priced; the resumed turn kept the session's prefix (the block
    # went to its tail), so nothing is blamed for a change
    lines = [r["cache"] for r in rows]
    assert all(line["outcome"] in ("first", "hit", "short") for line in lines), lines
    assert all("cost" in line and "direct_cost" in line for line in lines)
    assert "changed_by" not in lines[2] and "cause" not in lines[2]


def test_after_claude_codes_own_compact_the_folder_is_still_known(
    agent_proxy,
    anthropic_upstream,
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    """``claude -p /compact --continue`` puts a summary in place of the whole history under the
    same session id; the next turn's "the folder you just created" still names the folder (its
    branch of the session's state started empty: nothing was found)."""
    proxy = agent_proxy()
    target = tmp_path / "work" / "build_output"
    claude = Claude(proxy.url, tmp_path / "home", tmp_path / "work")
    _script_mkdir(anthropic_upstream, target)
    _result(claude.run(MAKE))
    summary = "<summary>The user asked for a folder for the build output; it was made.</summary>"
    anthropic_upstream.responder = lambda seen: Turn([text(summary)])
    assert _result(claude.run("/compact", "--continue"))["is_error"] is False
    _script_rmdir(anthropic_upstream, target)
    out = _result(claude.run(DELETE, "--continue"))
    assert out["result"] == "Deleted the folder."
    resumed = anthropic_upstream.messages[-2]
    assert summary[9:40] in orjson.dumps(resumed.json["messages"][0]).decode()  # compacted
    # the environment notice Claude Code empties after /compact, and the deferred-tools notice
    # after the prompt, are forwarded as sent: the block is on the prompt, not after the notice
    emptied, notice = resumed.json["messages"][1], resumed.json["messages"][-1]
    assert emptied["role"] == "system" and emptied["content"] == [], emptied
    assert notice["role"] == "system" and "<ctxproxy-context>" not in orjson.dumps(notice).decode()
    block = injected_block(last_user_side_text(resumed))
    assert str(target) in block, block
    assert not target.exists()
