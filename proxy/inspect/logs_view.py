"""Terminal rendering of the request log (``ctxproxy logs``, ``ctxproxy logs --follow``): one
line per request that fits 100 columns (time, request id, principal, status, model, billed input
sent → forwarded, the proxy's time), ``--wide`` adding the whole session id, protocol, cache,
rule counts and sections on lines of their own. On a terminal the lines are styled; piped, they
are plain text, never cut or wrapped."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from proxy.inspect.report_view import billed, for_terminal
from rules.context.measure import SECTIONS
from rules.report import listed_count

if TYPE_CHECKING:
    from proxy.store.base import Store

LOOKBACK_S = 5.0  # rows are inserted milliseconds after created_at
PRINCIPAL_WIDTH = 12  # a compact column: the full name starts the session id (--wide, --json)
MODEL_WIDTH = (10, 28)  # the model column's width, at least and at most (on a terminal)
TOKENS_WIDTH = 15  # "1234567→1234567", and the header "billed sent→fwd"
MS_WIDTH = 8  # "1234.5ms"
HEADER = ("time", "request", "principal", "st", "model", "billed sent→fwd", "proxy")


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts or 0).strftime("%H:%M:%S") if ts else "-"


def _principal(r: dict[str, Any]) -> str:
    name = str(r.get("principal") or "-")
    return name if len(name) <= PRINCIPAL_WIDTH else name[: PRINCIPAL_WIDTH - 1] + "…"


def _fit(text: str, width: int) -> str:
    """``text`` padded to ``width``, cut with "…" when longer."""
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"


def _model_width(width: int | None, id_width: int) -> int:
    """What is left for the model on a ``width``-column terminal (None: not a terminal)."""
    if width is None:
        return MODEL_WIDTH[1]
    fixed = 8 + id_width + PRINCIPAL_WIDTH + 3 + TOKENS_WIDTH + MS_WIDTH + 7  # separators, margin
    return max(MODEL_WIDTH[0], min(MODEL_WIDTH[1], width - fixed))


def _model(model: str, width: int | None, model_width: int | None, id_width: int) -> str:
    if width is None:  # piped: whole, so a script reads what was logged
        return model.ljust(model_width or 20)
    return _fit(model, _model_width(width, id_width))


def _tokens(r: dict[str, Any]) -> str:
    before, after = billed(r, "before"), billed(r, "after")
    if before is None:
        return "-"
    return f"{before}" if before == after else f"{before}→{after}"


def format_line(
    r: dict[str, Any], width: int | None = None, model_width: int | None = None
) -> Text:
    """One request on one line: time, request id (whole: ``show`` takes it), principal (short),
    status, model, billed input sent → forwarded (system, tools schema and messages), the
    proxy's own time. ``width``: a terminal's, the model column fitted to it (None: a pipe,
    where the model is never cut: padded to ``model_width``, by default 20)."""
    r = for_terminal(r)  # strings from requests: no terminal escapes
    status = r.get("status")
    colour = "green" if status and status < 400 else "red" if status else "yellow"
    rid = str(r.get("id"))
    line = Text.assemble(
        (_when(r.get("created_at")), "dim"),
        " ",
        (rid, "bold"),
        " ",
        (_principal(r).ljust(PRINCIPAL_WIDTH), "yellow"),
        " ",
        (str(status if status is not None else "…").ljust(3), colour),
        " ",
        _model(str(r.get("model") or "-"), width, model_width, len(rid)),
        " ",
        _tokens(r).rjust(TOKENS_WIDTH),
        " ",
        f"{r.get('overhead_ms') or 0:.1f}ms".rjust(MS_WIDTH),
    )
    if r.get("error_type"):
        line.append(f" {r['error_type']}", style="red")
    return line


def _size(item: dict[str, Any], name: str) -> str | None:
    """A section's size, ``name before→after`` (``name n`` unchanged); None when empty."""
    before, after = item.get("before") or 0, item.get("after") or 0
    if not before and not after:
        return None
    return f"{name} {before}" if before == after else f"{name} {before}→{after}"


def detail_lines(r: dict[str, Any]) -> list[Text]:
    """``--wide``'s lines under a request: the whole session id, the protocol, cache, what the
    rules did, the latency; then the sections (tokens) that are not empty."""
    r = for_terminal(r)
    report = found if isinstance(found := r.get("report"), dict) else {}
    repairs, pruned = listed_count(report, "repairs"), listed_count(report, "pruning")
    first = Text.assemble(
        " " * 9,
        "session ",
        (str(r.get("session_id") or "-"), "cyan"),
        " · ",
        (str(r.get("protocol") or "chat"), "magenta"),
        f" · cached {r.get('cached_tokens') or 0}",
        f" · repairs {repairs} · pruned {pruned}",
        f" · latency {r.get('latency_ms') or 0:.0f}ms",
    )
    sections: dict[str, Any] = found if isinstance(found := r.get("sections"), dict) else {}
    names = [n for n in (*SECTIONS, *sorted(set(sections) - set(SECTIONS))) if n in sections]
    sizes = [
        size
        for n in names
        if isinstance(item := sections[n], dict) and (size := _size(item, n)) is not None
    ]
    lines = [first]
    if sizes:
        lines.append(Text(" " * 9 + "sections " + " · ".join(sizes), style="dim"))
    return lines


def header_line(width: int | None, model_width: int | None = None) -> Text:
    model = _model_width(width, 28) if width is not None else model_width or 20
    cells = [
        HEADER[0].ljust(8),
        HEADER[1].ljust(28),
        HEADER[2].ljust(PRINCIPAL_WIDTH),
        HEADER[3].ljust(3),
        HEADER[4].ljust(model),
        HEADER[5].rjust(TOKENS_WIDTH),
        HEADER[6].rjust(MS_WIDTH),
    ]
    return Text(" ".join(cells).rstrip(), style="bold")


def emit(console: Console, line: Text) -> None:
    """A line as it is: styled on a terminal (wrapped only at spaces, if ever), plain text when
    piped (never cut or wrapped: a pipe has no width)."""
    if console.is_terminal:
        console.print(line)
    else:
        console.file.write(line.plain + "\n")


def print_rows(
    rows: list[dict[str, Any]], console: Console | None = None, wide: bool = False
) -> None:
    """The requests, newest first: one line each (``format_line``), with ``--wide``'s details."""
    console = console or Console()
    width = console.width if console.is_terminal else None
    if not rows:
        emit(console, Text("no requests logged", style="dim"))
        return
    # piped: the model column as wide as the longest model listed (never cut)
    models = max(len(str(r.get("model") or "-")) for r in rows) if width is None else None
    emit(console, header_line(width, models))
    for r in rows:
        emit(console, format_line(r, width, models))
        if wide:
            for line in detail_lines(r):
                emit(console, line)


async def follow(
    store: Store,
    console: Console,
    session: str | None = None,
    interval: float = 0.5,
    since: float | None = None,
    polls: int | None = None,
    principal: str | None = None,
    wide: bool = False,
) -> int:
    """Print requests created after ``since`` (default: now) as they complete, until interrupted
    (or after ``polls`` polls); returns how many were printed. Rows are written a little after
    they are created and complete in any order, so each poll looks back LOOKBACK_S behind the
    newest row (and behind the oldest one still in flight) and skips ids already printed."""
    start = time.time() if since is None else since
    width = console.width if console.is_terminal else None
    cursor, pending_from, lower = start, None, start - LOOKBACK_S
    printed: dict[str, float] = {}
    count = n = 0
    while polls is None or n < polls:
        n += 1
        # Never moves back, so an id forgotten below cannot be printed twice.
        lower = max(lower, min(cursor, pending_from or cursor) - LOOKBACK_S)
        rows = await store.list_requests(
            session=session, principal=principal, after_created=lower, limit=1000, bodies=False
        )
        rows.reverse()  # oldest first
        for r in rows:
            if r["created_at"] > start and r.get("status") is not None and r["id"] not in printed:
                emit(console, format_line(r, width))
                for line in detail_lines(r) if wide else ():
                    emit(console, line)
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
