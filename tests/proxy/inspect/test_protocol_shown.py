"""The terminal views say which protocol a request came in (``logs``, ``logs --follow``, ``show``)
and list the sections only some protocols have (thinking, reasoning)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from proxy.inspect.logs_view import detail_lines, print_rows
from proxy.inspect.show import render


def row(protocol: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "req_1",
        "created_at": 1_700_000_000.0,
        "session_id": "s-1",
        "model": "claude-opus-5-5",
        "upstream": "anthropic",
        "protocol": protocol,
        "status": 200,
        "tokens_before": 120,
        "tokens_after": 130,
        "sections": {"user": {"before": 20, "after": 20}, "thinking": {"before": 9, "after": 9}},
        "report": {"repairs": [], "pruning": []},
        **extra,
    }


def test_logs_wide_has_the_protocol_and_the_thinking_section() -> None:
    out = io.StringIO()
    print_rows([row("anthropic"), row("chat", sections={})], Console(file=out, width=250), True)
    lines = out.getvalue().splitlines()
    assert " · anthropic · " in lines[2] and " · chat · " in lines[5]
    assert "sections user 20 · thinking 9" in lines[3]


def test_follow_line_and_show_name_the_protocol() -> None:
    (details, *_) = detail_lines(row("responses"))
    assert " · responses · " in details.plain
    out = io.StringIO()
    render(row("anthropic"), Console(file=out, width=200, color_system=None))
    assert "protocol anthropic" in out.getvalue()
