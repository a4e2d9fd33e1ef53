"""Tier 3, a real agent: Codex 0.169.0 (``codex exec``) → a live proxy → a scripted Responses
upstream. The model asks for ``exec_command`` ``mkdir``, Codex runs it (the folder really
exists), and ``codex exec resume --last "delete the folder you just created"`` reaches the
upstream with the folder's path named in a ``<ctxproxy-context>`` block.

Also the websocket attempt of Codex's built-in provider: refused with HTTP 426 Upgrade Required,
Codex falls back to HTTPS at once; any other refusal (403, 404, …) costs it about 6.5 s of
retries (7 handshakes) first.

Installed by ``bin/test`` (npm); without it these tests skip with the reason."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import orjson

from tests.support.agent_clis import CODEX_KEY, Codex
from tests.support.agent_proxy import (
    completed_rows,
    injected_block,
    last_user_side_text,
    section,
)
from tests.support.protocol_upstreams import ResponsesUpstream, thinking, tool, tool_then_text
from tests.support.tcp_tap import TcpTap

MAKE = "make a folder for the build output"
DELETE = "delete the folder you just created"
ENCRYPTED = "gAAAAABo-encrypted-reasoning-never-to-be-altered=="


def _script_mkdir(upstream: ResponsesUpstream, target: Path) -> None:
    upstream.responder = tool_then_text(
        tool("exec_command", cmd=f"mkdir -p {target}"),
        "Created.",
        lead=[thinking("**Planning** make the folder with the shell", ENCRYPTED)],
    )


def _script_rmdir(upstream: ResponsesUpstream, target: Path) -> None:
    upstream.responder = tool_then_text(tool("exec_command", cmd=f"rmdir {target}"), "Deleted.")


def _ok(run, answer: str) -> None:  # type: ignore[no-untyped-def]
    assert run.returncode == 0, run.explain()
    assert run.stdout.strip().endswith(answer), run.explain()


def _items(seen, kind: str) -> list[dict]:  # type: ignore[no-untyped-def]
    return [i for i in seen.json["input"] if i.get("type") == kind]


def test_scripted_upstream_alone_drives_a_tool_round_trip(responses_upstream, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The fake itself, without the proxy: Codex completes the scripted session."""
    target = tmp_path / "work" / "direct_folder"
    _script_mkdir(responses_upstream, target)
    codex = Codex(responses_upstream.base_url, tmp_path / "home", tmp_path / "work")
    _ok(codex.run(MAKE), "Created.")
    assert target.is_dir()
    _, second = responses_upstream.responses
    (call,) = _items(second, "function_call")
    (output,) = _items(second, "function_call_output")
    assert call["call_id"] == output["call_id"] and call["name"] == "exec_command"
    assert responses_upstream.ws_attempts == []  # a custom provider never tries websockets


def test_codex_through_ctxproxy_then_resume(agent_proxy, responses_upstream, tmp_path) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    target = tmp_path / "work" / "build_output"
    codex = Codex(proxy.base_url, tmp_path / "home", tmp_path / "work")

    # Turn 1: exec_command mkdir runs for real, its output goes back through the proxy.
    _script_mkdir(responses_upstream, target)
    _ok(codex.run(MAKE), "Created.")
    assert target.is_dir(), "exec_command did not run"
    first, second = responses_upstream.responses
    for seen in (first, second):
        assert seen.path == "/v1/responses"
        assert seen.header("authorization") == f"Bearer {CODEX_KEY}"
        assert seen.header("originator") == "codex_exec"
        thread = seen.header("session-id")
        assert thread and seen.header("thread-id") == thread
        assert seen.header("x-codex-window-id") == f"{thread}:0"
        assert orjson.loads(seen.header("x-codex-turn-metadata") or "{}")["thread_id"] == thread
        assert seen.json["prompt_cache_key"] == thread
    (call,) = _items(second, "function_call")
    (output,) = _items(second, "function_call_output")
    assert call["call_id"] == output["call_id"]
    assert orjson.loads(call["arguments"]) == {"cmd": f"mkdir -p {target}"}
    # The reasoning item comes back untouched, right before the call it led to.
    (reasoning,) = _items(second, "reasoning")
    assert reasoning["encrypted_content"] == ENCRYPTED
    items = second.json["input"]
    assert items.index(reasoning) + 1 == items.index(call)
    # Codex echoes the item as the upstream sent it (its id included); the proxy keeps it so.
    sent_ids = [i["id"] for i in _items(first, "message")]
    assert sent_ids == [i["id"] for i in _items(second, "message")][: len(sent_ids)]

    rows = completed_rows(proxy, 2)
    assert [r["protocol"] for r in rows] == ["responses", "responses"]
    assert all(r["status"] == 200 and r["model"] == "gpt-5" for r in rows)
    assert section(rows[0], "system") > 0 and section(rows[0], "tools") > 0
    assert section(rows[0], "user") > 0
    assert section(rows[1], "tool_calls") > 0 and section(rows[1], "tool_results") > 0
    assert rows[1]["prompt_tokens"] == 31 and rows[1]["cached_tokens"] == 17
    assert rows[1]["completion_tokens"] == 8  # from response.completed in the relayed SSE
    assert rows[0]["session_id"] and rows[0]["session_id"] == rows[1]["session_id"]

    # Turn 2: resumed; the upstream is told which folder "the folder you just created" is.
    _script_rmdir(responses_upstream, target)
    _ok(codex.run(DELETE, "resume", "--last"), "Deleted.")
    resumed = responses_upstream.responses[2]
    assert resumed.header("session-id") == first.header("session-id")
    text = last_user_side_text(resumed)
    assert DELETE in text
    block = injected_block(text)
    assert str(target) in block, block
    assert not target.exists(), "the resumed session did not run rmdir"

    rows = completed_rows(proxy, 4)
    assert [r["protocol"] for r in rows] == ["responses"] * 4
    assert rows[2]["session_id"] == rows[0]["session_id"]
    # Codex writes compact JSON: its bodies are read from the session's last ones
    metrics = httpx.get(proxy.url + "/metrics").text
    reused = re.search(r'ctxproxy_bodies_reused_total\{protocol="responses"\} (\S+)', metrics)
    assert reused is not None and float(reused.group(1)) >= 1, metrics
    assert section(rows[2], "injected", "after") > 0
    assert section(rows[2], "assistant") > 0 and section(rows[2], "tool_results") > 0


def _fallback_seconds(tap: TcpTap) -> float:
    ws = tap.first("GET", "/v1/responses")
    post = tap.first("POST", "/v1/responses")
    assert ws is not None, f"Codex made no websocket attempt: {tap.lines}"
    assert post is not None, f"Codex never fell back to POST /v1/responses: {tap.lines}"
    return post.at - ws.at


def _builtin_provider_run(base: str, responses_upstream, tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "work" / "ws_folder"
    _script_mkdir(responses_upstream, target)
    codex = Codex(base + "/v1", tmp_path / "home", tmp_path / "work", provider="openai")
    _ok(codex.run(MAKE, timeout=30), "Created.")
    assert target.is_dir()


def test_426_makes_codex_fall_back_to_https_at_once(responses_upstream, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The answer the proxy must give, measured against the fake alone: one handshake answered
    426 Upgrade Required and Codex's next request is the POST."""
    responses_upstream.ws_status = 426
    tap = TcpTap("127.0.0.1", int(responses_upstream.url.rsplit(":", 1)[1])).start()
    try:
        _builtin_provider_run(tap.url, responses_upstream, tmp_path)
    finally:
        tap.stop()
    assert len(responses_upstream.ws_attempts) == 1
    attempt = responses_upstream.ws_attempts[0]
    assert attempt.header("openai-beta") == "responses_websockets=2026-02-06"
    assert _fallback_seconds(tap) < 1.0


def test_codex_websocket_attempt_through_ctxproxy_falls_back_fast(
    agent_proxy,
    responses_upstream,
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    """Codex's built-in provider redirected to the proxy (``openai_base_url``): its websocket
    attempt on ``/v1/responses`` must cost under a second before the HTTPS POST."""
    proxy = agent_proxy()
    tap = TcpTap("127.0.0.1", int(proxy.url.rsplit(":", 1)[1])).start()
    try:
        _builtin_provider_run(tap.url, responses_upstream, tmp_path)
    finally:
        tap.stop()
    handshakes = [x for x in tap.lines if x.method == "GET" and x.target == "/v1/responses"]
    seconds = _fallback_seconds(tap)
    print(f"websocket fallback: {seconds:.3f}s after {len(handshakes)} handshake(s)")
    assert seconds < 1.0, f"fallback took {seconds:.2f}s after {len(handshakes)} handshakes"
    assert responses_upstream.ws_attempts == []  # refused by the proxy, not relayed
    (seen, _) = responses_upstream.responses
    assert seen.header("version") == "0.169.0"  # only the built-in provider sends it
    rows = completed_rows(proxy, 2)
    assert {r["protocol"] for r in rows if r["path"] == "/v1/responses"} == {"responses"}
