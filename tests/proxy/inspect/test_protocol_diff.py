"""With ``capture_payloads: true`` the diff of what the client sent against what was forwarded
works for every protocol: the Responses API's ``instructions`` and ``input`` items (Codex), and
Anthropic's ``system`` and ``messages`` (Claude Code), in ``show`` and on the /ui request page;
a request whose payloads were not captured still says so."""

from __future__ import annotations

import html
import io
from typing import Any

import httpx
import orjson
import pytest
from rich.console import Console

from proxy.inspect import payload_diff
from proxy.inspect import report_view as rv
from proxy.inspect.show import render

KEY = {"authorization": "Bearer sk-test-0123456789abcdef", "x-api-key": "sk-test-0123456789ab"}
EXEC = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a command.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}
BASH = {
    "name": "Bash",
    "description": "Run a shell command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def _call(call_id: str, cmd: str) -> dict[str, Any]:
    args = orjson.dumps({"cmd": cmd}).decode()
    return {"type": "function_call", "name": "exec_command", "arguments": args, "call_id": call_id}


def codex_body() -> dict[str, Any]:
    """A Codex turn whose second call was interrupted (no output): the proxy adds one."""
    return {
        "model": "gpt-5",
        "instructions": "You are Codex, a coding agent.",
        "tools": [EXEC],
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
            _call("call_1", "ls"),
            {"type": "function_call_output", "call_id": "call_1", "output": "a.py\nb.py"},
            _call("call_2", "pytest -q"),
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ok?"}]},
        ],
    }


def claude_body() -> dict[str, Any]:
    """A Claude Code turn whose tool call was interrupted: the proxy answers it."""
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "tools": [BASH],
        "messages": [
            {"role": "user", "content": "list the files"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Listing."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "Bash",
                        "input": {"command": "ls"},
                    },
                ],
            },
            {"role": "user", "content": "never mind, what is 2+2?"},
        ],
    }


def _served(proxy: Any, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(proxy.url + path, json=body, headers=KEY, timeout=10)
    assert r.status_code == 200, r.text
    return proxy.row(r.headers["x-ctxproxy-request-id"])


def _shown(row: dict[str, Any]) -> str:
    out = io.StringIO()
    render(row, Console(file=out, width=140, color_system=None))
    return out.getvalue()


def test_responses_diff_reads_the_input_items(agent_proxy) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy(store={"capture_payloads": True})
    row = _served(proxy, "/v1/responses", codex_body())
    diff = rv.message_diff(row)
    assert diff is not None, "both payloads are captured"
    assert diff[0]["op"] == "same" and diff[0]["title"].startswith("= instructions, items 0..")
    added = [d for d in diff if d["op"] == "added"]
    assert added and added[0]["role"] == "function_call_output"
    assert added[0]["title"] == f"+ item {added[0]['forwarded']} added by the proxy " + (
        "(function_call_output)"
    )
    assert added[0]["lines"][0] == "+ (result of call_2)"
    shown = _shown(row)
    assert "payloads not captured" not in shown
    assert added[0]["title"] in shown and "+ (result of call_2)" in shown
    page = html.unescape(httpx.get(f"{proxy.url}/ui/requests/{row['id']}").text)
    assert "Payloads were not captured" not in page
    assert added[0]["title"] in page and diff[0]["title"] in page


def test_anthropic_diff_reads_system_and_messages(agent_proxy) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy(store={"capture_payloads": True})
    row = _served(proxy, "/v1/messages", claude_body())
    diff = rv.message_diff(row)
    assert diff is not None and diff[0]["op"] == "same"
    assert diff[0]["title"].startswith("= system, messages 0..")
    changed = [d for d in diff if d["op"] != "same"]
    assert changed, "the interrupted call is answered in the forwarded body"
    lines = [line for d in changed for line in d["lines"]]
    assert any("(result of toolu_1)" in line and line.startswith("+") for line in lines)
    shown = _shown(row)
    assert "payloads not captured" not in shown and "(result of toolu_1)" in shown
    page = html.unescape(httpx.get(f"{proxy.url}/ui/requests/{row['id']}").text)
    assert "Payloads were not captured" not in page and "(result of toolu_1)" in page


def test_without_captured_payloads_the_responses_row_says_so(agent_proxy) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    row = _served(proxy, "/v1/responses", codex_body())
    assert rv.message_diff(row) is None
    assert "payloads not captured" in _shown(row)


@pytest.mark.parametrize(
    ("client", "forwarded", "titles"),
    [
        (  # an item's output pruned in place
            [{"type": "function_call_output", "call_id": "c", "output": "long\nlog"}],
            [{"type": "function_call_output", "call_id": "c", "output": "[ctxproxy: elided]"}],
            ["~ item 0 → 0 (function_call_output)"],
        ),
        (  # a string input
            "hello",
            "hello",
            ["= input unchanged"],
        ),
        (  # reasoning kept, a message added
            [{"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]}],
            [
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
                {"role": "user", "content": "note"},
            ],
            ["= items 0..0 unchanged", "+ item 1 added by the proxy (user)"],
        ),
    ],
)
def test_responses_entries(client: Any, forwarded: Any, titles: list[str]) -> None:
    row = {
        "protocol": "responses",
        "request_body": orjson.dumps({"model": "m", "input": client}).decode(),
        "forwarded_body": orjson.dumps({"model": "m", "input": forwarded}).decode(),
    }
    assert [d["title"] for d in rv.message_diff(row) or []] == titles


def test_anthropic_blocks_read_as_lines() -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "s"}
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    answer = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [{"type": "text", "text": "x"}],
    }
    body = {"system": "sys", "messages": [{"role": "assistant", "content": [thinking, call]}]}
    forwarded = {**body, "messages": [*body["messages"], {"role": "user", "content": [answer]}]}
    row = {
        "protocol": "anthropic",
        "request_body": orjson.dumps(body).decode(),
        "forwarded_body": orjson.dumps(forwarded).decode(),
    }
    diff = rv.message_diff(row) or []
    assert [d["title"] for d in diff] == [
        "= system, messages 0..0 unchanged",
        "+ message 1 added by the proxy (user)",
    ]
    assert diff[1]["lines"] == ["+ (result of t1)", "+ x"]


def test_gemini_contents_read_as_lines() -> None:
    call = {"functionCall": {"id": "c1", "name": "run_shell_command", "args": {"command": "ls"}},
            "thoughtSignature": "sig"}  # fmt: skip
    done = {"functionResponse": {"id": "c1", "name": "run_shell_command",
                                 "response": {"output": "a.txt"}}}  # fmt: skip
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "list"}]},
            {"role": "model", "parts": [{"text": "plan", "thought": True}, call]},
            {"role": "user", "parts": [done, done]},
        ],
        "systemInstruction": {"parts": [{"text": "You are Gemini CLI."}]},
    }
    forwarded = {**body, "contents": [*body["contents"][:2], {"role": "user", "parts": [done]}]}
    row = {
        "protocol": "gemini",
        "request_body": orjson.dumps(body).decode(),
        "forwarded_body": orjson.dumps(forwarded).decode(),
    }
    diff = rv.message_diff(row) or []
    assert [d["title"] for d in diff] == [
        "= system, contents 0..1 unchanged",
        "~ content 2 → 2 (user)",
    ]
    assert "-(result of run_shell_command c1)" in diff[1]["lines"]  # the copy the proxy dropped
    model_lines = rv.message_diff({**row, "forwarded_body": row["request_body"]}) or []
    assert model_lines[0]["op"] == "same"


def test_a_long_body_of_equal_messages_is_aligned_in_linear_time() -> None:
    """20,000 equal messages, the forwarded body changed in its middle: a matcher over all of
    them took 45 s on the event loop (its time grows with the product of the two lengths).
    Timed in the thread's CPU, which a loaded machine stretches less than the wall clock."""
    import time

    client = [{"role": "user", "content": "x"}] * 20_000
    forwarded = [*client[:9_000], {"role": "user", "content": "[ctxproxy: dropped]"},
                 *client[11_000:]]  # fmt: skip
    row = {"protocol": "chat", "request_body": orjson.dumps({"messages": client}).decode(),
           "forwarded_body": orjson.dumps({"messages": forwarded}).decode()}  # fmt: skip
    started = time.thread_time()
    found = payload_diff.diff(row)
    assert time.thread_time() - started < 3
    assert found is not None
    ops = [d["op"] for d in found]
    assert ops[0] == "same"  # the shared start is a run, not entries
    shown = ops.count("removed") + ops.count("changed")
    assert shown == payload_diff.MAX_HUNKS - 1  # then the page's bound: the rest counted
    assert found[-1]["title"] == f"… {2_000 - shown} more changed entries, not shown"
