"""``ctxproxy show`` and ``ctxproxy logs`` print client-chosen strings (models, session ids,
commands, paths, error text) verbatim: rich must never read them as markup, and a terminal must
never act on the escape sequences they hold (shown made visible instead)."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from rich.console import Console

from proxy.cli import main
from proxy.inspect import logs_view, show
from proxy.inspect import report_view as rv
from tests.proxy.inspect.test_show import realistic_row, write_rows

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


# ----- terminal escapes: what a terminal would act on is shown, never sent raw -----

# Sequences from the data that must never reach the terminal raw: a colour rich never uses, an
# OSC 8 hyperlink, a title change, a cursor-position query, BEL, a one-byte C1 CSI, a bidi
# override (shows "exe.txt" as "txt.exe").
ATTACKS = {
    "colour": "\x1b[38;5;99mfake\x1b[0m",
    "hyperlink": "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "title": "\x1b]0;pwned\x07",
    "query": "\x1b[6n",
    "c1": "\x9b31mc1",
    "bidi": "report\u202etxt.exe",
}
RAW = ["\x1b[38;5;99m", "\x1b]8;;http", "\x1b]0;pwned", "\x1b[6n", "\x07", "\x9b", "\u202e"]
EVIL = "".join(ATTACKS.values())


def escaping_row(request_id: str = "req_evil") -> dict:
    """Every client-chosen field of a row carries the sequences, captured payloads included."""
    row = nasty_row(EVIL)
    row["id"] = request_id
    body = {"model": EVIL, "messages": [{"role": "user", "content": f"hi {EVIL}\nline two"}]}
    forwarded = {"model": EVIL, "messages": [{"role": "user", "content": f"hi {EVIL}\nline 2"}]}
    row["request_body"] = orjson.dumps(body).decode()  # JSON text: ESC stored as \u001b
    row["forwarded_body"] = orjson.dumps(forwarded).decode()
    return row


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=400, force_terminal=True, color_system="truecolor"), out


def assert_no_raw_sequences(printed: str) -> None:
    for raw in RAW:
        assert raw not in printed, repr(raw)
    # shown, made visible: the reader still sees what the client sent
    assert "\\x1b]8;;http://evil.example/" in printed and "\\u202etxt.exe" in printed


def test_show_neutralises_terminal_escapes_from_the_data() -> None:
    c, out = terminal()
    show.render(escaping_row(), c)
    printed = out.getvalue()
    assert_no_raw_sequences(printed)
    assert "\x1b[" in printed  # rich's own styling is still there (a real terminal)
    assert "line two" in printed and "line 2" in printed  # the diff of the captured payloads


def test_logs_neutralise_terminal_escapes_from_the_data() -> None:
    c, out = terminal()
    row = escaping_row()
    logs_view.print_rows([row], c)
    c.print(logs_view.format_line(row))
    assert_no_raw_sequences(out.getvalue())


def test_terminal_safe_keeps_text_and_layout() -> None:
    assert rv.terminal_safe("a\tb\nc ü 中文 →") == "a\tb\nc ü 中文 →"
    assert rv.terminal_safe("x\r\ny\rz\x7f") == "x\ny\\x0dz\\x7f"
    assert rv.terminal_safe("\u2066iso\u2069") == "\\u2066iso\\u2069"


async def test_show_and_logs_commands_print_no_escapes(tmp_path: Path) -> None:
    """The CLI as run: text output, and --json (orjson writes DEL, C1 and bidi marks raw)."""
    db = str(tmp_path / "log.db")
    row = escaping_row()
    await write_rows(db, row)
    runs = {
        args: subprocess.run(
            [sys.executable, "-m", "proxy.cli", *args, "--db", db],
            capture_output=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "300"},
        )
        for args in (
            ("show", "req_evil"),
            ("logs",),
            ("show", "req_evil", "--json"),
            ("logs", "--json"),
        )
    }
    for args, run in runs.items():
        assert run.returncode == 0, run.stderr
        text = run.stdout.decode()
        for raw in RAW:
            assert raw not in text, (args, repr(raw))
        assert "\x1b" not in text  # not a terminal: no styling either
    shown = orjson.loads(runs[("show", "req_evil", "--json")].stdout)
    assert shown["model"] == EVIL  # the same data, only escaped
    listed = orjson.loads(runs[("logs", "--json")].stdout.splitlines()[0])
    assert listed["session_id"] == EVIL


FORGED = "gpt-4o\n15:35:28 req_00000000000000000000dead admin 200 gpt-4o 99999 → 1 0.1ms"


@pytest.mark.parametrize("field", ["model", "session_id", "error_type"])
def test_a_line_break_in_a_rows_field_forges_no_line(field: str) -> None:
    row = realistic_row()
    row[field] = FORGED
    row["status"] = 502
    c, out = console()
    c.print(logs_view.format_line(row))
    for line in logs_view.detail_lines(row):
        c.print(line)
    printed = out.getvalue()
    assert "\nreq_" not in printed and "\n15:35:28" not in printed
    assert "gpt-4o\\n15:35:28" in printed or field != "model"


async def test_a_line_break_in_a_model_forges_no_cost_line(tmp_path: Path, capsys) -> None:
    """``logs --cost`` names the session's latest model on its line: a model a client named with
    a line break (or an escape) printed a session's line of its own making."""
    db = str(tmp_path / "log.db")
    costed = realistic_row("req_cost_1", created_at=1_700_000_000.0)
    costed["cache"] = {"outcome": "hit", "prompt": 547, "cached": 384, "cost": 200.0,
                       "direct_cost": 547.0}  # fmt: skip
    latest = realistic_row("req_cost_2", created_at=1_700_000_001.0)
    latest["model"] = FORGED.replace("gpt-4o\n", "gpt-4o\nsess-forged  input ") + EVIL
    await write_rows(db, costed, latest)
    code = await asyncio.to_thread(main, ["logs", "--cost", "--db", db])
    out = capsys.readouterr().out
    assert code == 0
    assert len(out.splitlines()) == 1, out
    assert "\nsess-forged" not in out and "gpt-4o\\nsess-forged" in out
    for raw in RAW:
        assert raw not in out, repr(raw)
