"""The total every view and metric gives is the billed input: system, tools schema and messages,
as the provider bills them (for Claude Code the tools schema is most of a request). ``show``,
``logs``, the /ui request list, request page, session list and session chart, and
``ctxproxy_tokens_total`` all count the tools schema, labelled as billed input; what is
forwarded is not changed by it."""

from __future__ import annotations

import html
import io
import re
from typing import Any

import httpx
import pytest
from rich.console import Console

from proxy.cli import main
from proxy.inspect import report_view as rv
from proxy.inspect.logs_view import print_rows
from proxy.inspect.show import render
from proxy.telemetry.metrics import Metrics

KEY = {"x-api-key": "sk-ant-test-0123456789abcdef", "x-session-id": "billed"}
SCHEMA = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The command to run, in a POSIX shell."},
        "timeout": {"type": "number", "description": "Milliseconds before the run is killed."},
        "description": {"type": "string", "description": "What the command does, in 5 words."},
    },
    "required": ["command"],
}
# a Claude Code sized tools schema: many tools with long descriptions
TOOLS = [
    {"name": f"Tool{i}", "description": "Does a thing. " * 40, "input_schema": SCHEMA}
    for i in range(12)
]


def claude_code_body(turn: str = "what is in this folder?") -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "system": [{"type": "text", "text": "You are Claude Code, a coding agent."}],
        "tools": TOOLS,
        "messages": [{"role": "user", "content": turn}],
    }


@pytest.fixture
def served(agent_proxy, anthropic_upstream) -> tuple[Any, dict[str, Any]]:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    body = claude_code_body()
    r = httpx.post(proxy.url + "/v1/messages", json=body, headers=KEY, timeout=10)
    assert r.status_code == 200, r.text
    assert anthropic_upstream.last.json["tools"] == TOOLS  # forwarded as sent
    row = proxy.row(r.headers["x-ctxproxy-request-id"])
    tools = row["sections"]["tools"]["before"]
    assert tools > 5 * row["tokens_before"], "the tools schema is most of this request"
    return proxy, row


def billed(row: dict[str, Any]) -> tuple[int, int]:
    return (
        row["tokens_before"] + row["sections"]["tools"]["before"],
        row["tokens_after"] + row["sections"]["tools"]["after"],
    )


def test_show_totals_the_billed_input(served) -> None:  # type: ignore[no-untyped-def]
    _, row = served
    before, after = billed(row)
    assert (rv.billed(row, "before"), rv.billed(row, "after")) == (before, after)
    out = io.StringIO()
    render(row, Console(file=out, width=160, color_system=None))
    text = out.getvalue()
    assert f"billed input {before} → {after} tokens" in text
    assert f"+ tools schema {row['sections']['tools']['before']}" in text
    assert re.search(rf"billed input before\s+│\s+{before}\b", text)


def test_logs_lists_the_billed_input(served, capsys) -> None:  # type: ignore[no-untyped-def]
    proxy, row = served
    before, after = billed(row)
    tokens = f"{before}" if before == after else f"{before}→{after}"
    out = io.StringIO()
    print_rows([row], Console(file=out, width=100))
    line = out.getvalue().splitlines()[1]
    assert row["id"] in line and f" {tokens} " in line
    assert main(["logs", "--db", proxy.db_path]) == 0
    assert f" {tokens} " in capsys.readouterr().out


def test_ui_pages_total_the_billed_input(served) -> None:  # type: ignore[no-untyped-def]
    proxy, row = served
    before, after = billed(row)
    request_page = html.unescape(httpx.get(f"{proxy.url}/ui/requests/{row['id']}").text)
    total = request_page.split('<tr class="total">')[1].split("</tr>")[0]
    assert "total billed input" in total and f">{before}<" in total and f">{after}<" in total
    listing = html.unescape(httpx.get(f"{proxy.url}/ui").text)
    sessions = listing.split('id="sessions"')[1].split("</table>")[0]
    requests = listing.split('id="requests"')[1].split("</table>")[0]
    assert "billed input sent → forwarded" in sessions and f"{before} → {after}" in sessions
    assert "billed input sent → forwarded" in requests and f"{before} → {after}" in requests
    session = html.unescape(httpx.get(f"{proxy.url}/ui/sessions/{row['session_id']}").text)
    turns = session.split('id="turns"')[1]
    assert f'<td class="num">{before}</td><td class="num">{after}</td>' in turns
    assert f"billed input as sent by the client: {before}" in session  # the chart's point


def test_metrics_count_the_billed_input(served) -> None:  # type: ignore[no-untyped-def]
    proxy, row = served
    before, after = billed(row)
    text = httpx.get(proxy.url + "/metrics").text
    assert f'ctxproxy_tokens_total{{when="before"}} {float(before)}' in text
    assert f'ctxproxy_tokens_total{{when="after"}} {float(after)}' in text
    assert "Billed input tokens (system, tools schema and messages" in text


def test_metrics_of_a_row_add_its_tools_section() -> None:
    metrics = Metrics()
    row = {"id": "r", "status": 200, "tokens_before": 100, "tokens_after": 60}
    row["sections"] = {"tools": {"before": 7030, "after": 7030}}
    metrics.finished(row)
    metrics.finished({"id": "refused", "status": 400})  # before the rules: nothing measured
    text = metrics.exposition().decode()
    assert 'ctxproxy_tokens_total{when="before"} 7130.0' in text
    assert 'ctxproxy_tokens_total{when="after"} 7090.0' in text
