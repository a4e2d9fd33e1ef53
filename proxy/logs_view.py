"""Terminal rendering of the request log (``ctxproxy logs``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rich.console import Console
from rich.table import Table

SECTION_COLUMNS = ("system", "tools", "user", "assistant", "tool_results", "injected")


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts or 0).strftime("%H:%M:%S") if ts else "-"


def _size(sections: dict[str, Any] | None, name: str) -> str:
    item = (sections or {}).get(name) or {}
    before, after = item.get("before", 0), item.get("after", 0)
    return f"{before}" if before == after else f"{before}→{after}"


def print_rows(rows: list[dict[str, Any]], console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title="ctxproxy requests (newest first)")
    for col in ("id", "time", "session", "model", "status", "tokens", *SECTION_COLUMNS, "ms"):
        table.add_column(col, overflow="fold")
    for r in rows:
        tokens = f"{r.get('tokens_before') or 0}→{r.get('tokens_after') or 0}"
        table.add_row(
            r["id"],
            _when(r.get("created_at")),
            str(r.get("session_id") or "-")[:24],
            str(r.get("model") or "-"),
            str(r.get("status") or "…"),
            tokens,
            *(_size(r.get("sections"), c) for c in SECTION_COLUMNS),
            f"{r.get('overhead_ms') or 0:.1f}",
        )
    console.print(table)
