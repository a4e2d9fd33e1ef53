"""``ctxproxy show`` and ``ctxproxy logs`` print client-chosen strings (models, session ids,
commands, paths, error text) verbatim: rich must never read them as markup."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from proxy import logs_view, show
from tests.proxy.test_show import realistic_row

NASTY = ["ok[/]", "[/red]", "mkdir '[/red]'", "[bold]x[/bold]", "[link=http://e]y[/link]", "a[/b"]


def console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=400, color_system=None), out


def nasty_row(text: str) -> dict:
    row = realistic_row(session=text)
    row.update(model=text, upstream=text, session_id=text, error_type=text, error=text, status=502)
    report = row["report"]
    report["repairs"][0]["tool_call_id"] = text
    report["entities"][0]["path"] = text
    report["references"][0]["mention"] = text
    report["working_set"] = {text: text, "open_diagnostics": [text]}
    report["pruning"][0]["reason"] = text
    report["warnings"] = [{"rule": text, "message": text}]
    report["rule_errors"] = [{"rule": text, "error": text}]
    report["timings_ms"] = {text: 0.5}
    report["sections"][text] = {"before": 1, "after": 1}
    report["prune"] = {"stages": {text: 3}}
    return row


@pytest.mark.parametrize("text", NASTY)
def test_show_prints_markup_verbatim(text: str) -> None:
    c, out = console()
    show.render(nasty_row(text), c)
    printed = out.getvalue()
    assert printed.count(text) >= 8


@pytest.mark.parametrize("text", NASTY)
def test_logs_print_markup_verbatim(text: str) -> None:
    c, out = console()
    row = nasty_row(text)
    logs_view.print_rows([row], c)
    c.print(logs_view.format_line(row))
    assert out.getvalue().count(text) >= 3
