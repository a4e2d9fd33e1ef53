"""Terminal rendering of the request log (``ctxproxy logs``, ``ctxproxy logs --follow``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from proxy.inspect.report_view import for_terminal

if TYPE_CHECKING:
    from proxy.store.base import Store

LOOKBACK_S = 5.0  # rows are inserted milliseconds after created_at
SECTION_COLUMNS = ("system", "tools", "user", "assistant", "tool_results", "injected")
# Sections only some protocols have: a column when a listed row has it.
EXTRA_SECTIONS = ("thinking", "reasoning")
PRINCIPAL_WIDTH = 12  # a compact column: the full name starts the session id (and is in --json)


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts or 0).strftime("%H:%M:%S") if ts else "-"


def _size(sections: dict[str, Any] | None, name: str) -> str:
    item = (sections or {}).get(name) or {}
    before, after = item.get("before", 0), item.get("after", 0)
    return f"{before}" if before == after else f"{before}→{after}"


def _principal(r: dict[str, Any]) -> str:
    name = str(r.get("principal") or "-")
    return name if len(name) <= PRINCIPAL_WIDTH else name[: PRINCIPAL_WIDTH - 1] + "…"


def print_rows(rows: list[dict[str, Any]], console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title="ctxproxy requests (newest first)")
    extra = [c for c in EXTRA_SECTIONS if any(c in (r.get("sections") or {}) for r in rows)]
    sections = (*SECTION_COLUMNS, *extra)
    columns = ("id", "time", "principal", "session", "model", "protocol", "status", "tokens")
    for col in (*columns, *sections, "ms"):
        # every id whole (folded when long): ``logs --session`` takes it as printed; the short
        # cells on one line each
        table.add_column(col, overflow="fold", no_wrap=col in ("time", "principal"))
    for r in map(for_terminal, rows):  # strings from requests: no terminal escapes
        tokens = f"{r.get('tokens_before') or 0}→{r.get('tokens_after') or 0}"
        cells = (
            r["id"],
            _when(r.get("created_at")),
            _principal(r),
            str(r.get("session_id") or "-"),
            str(r.get("model") or "-"),
            str(r.get("protocol") or "chat"),
            str(r.get("status") or "…"),
            tokens,
            *(_size(r.get("sections"), c) for c in sections),
            f"{r.get('overhead_ms') or 0:.1f}",
        )
        table.add_row(*(Text(c) for c in cells))  # plain text: never parsed as rich markup
    console.print(table)


def format_line(r: dict[str, Any]) -> Text:
    """One completed request on one line (for ``logs --follow``)."""
    r = for_terminal(r)  # strings from requests: no terminal escapes
    status = r.get("status")
    colour = "green" if status and status < 400 else "red"
    tb, ta = r.get("tokens_before") or 0, r.get("tokens_after") or 0
    report = found if isinstance(found := r.get("report"), dict) else {}
    repairs, pruned = len(report.get("repairs") or []), len(report.get("pruning") or [])
    line = Text.assemble(
        (_when(r.get("created_at")), "dim"),
        " ",
        (r["id"], "bold"),
        " ",
        (_principal(r), "yellow"),
        " ",
        (str(r.get("session_id") or "-"), "cyan"),
        " ",
        str(r.get("model") or "-"),
        " ",
        (str(r.get("protocol") or "chat"), "magenta"),
        " ",
        (str(status), colour),
        f" tokens {tb}→{ta}",
        f" cached {r.get('cached_tokens') or 0}",
        f" repairs {repairs} pruned {pruned}",
        f" overhead {r.get('overhead_ms') or 0:.1f}ms latency {r.get('latency_ms') or 0:.0f}ms",
    )
    if r.get("error_type"):
        line.append(f" {r['error_type']}", style="red")
    return line


async def follow(
    store: Store,
    console: Console,
    session: str | None = None,
    interval: float = 0.5,
    since: float | None = None,
    polls: int | None = None,
    principal: str | None = None,
) -> int:
    """Print requests created after ``since`` (default: now) as they complete, until interrupted
    (or after ``polls`` polls); returns how many were printed. Rows are written a little after
    they are created and complete in any order, so each poll looks back LOOKBACK_S behind the
    newest row (and behind the oldest one still in flight) and skips ids already printed."""
    start = time.time() if since is None else since
    cursor, pending_from, lower = start, None, start - LOOKBACK_S
    printed: dict[str, float] = {}
    count = n = 0
    while polls is None or n < polls:
        n += 1
        # Never moves back, so an id forgotten below cannot be printed twice.
        lower = max(lower, min(cursor, pending_from or cursor) - LOOKBACK_S)
        rows = await store.list_requests(
            session=session, principal=principal, after_created=lower, limit=1000
        )
        rows.reverse()  # oldest first
        for r in rows:
            if r["created_at"] > start and r.get("status") is not None and r["id"] not in printed:
                console.print(format_line(r))
                printed[r["id"]] = r["created_at"]
                count += 1
        console.file.flush()  # live even when piped (``logs --follow | grep …``)
        pending = [r["created_at"] for r in rows if r.get("status") is None]
        pending_from = min(pending) if pending else None
        cursor = max([cursor, *(r["created_at"] for r in rows)])
        printed = {k: t for k, t in printed.items() if t > lower}
        if polls is None or n < polls:
            await asyncio.sleep(interval)
    return count
