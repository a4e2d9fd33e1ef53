"""``ctxproxy show REQUEST_ID``: one logged request in the terminal, drawn with rich: sections
before/after as proportional bars, what each rule did, timings, upstream usage, and (with captured
payloads) the client's messages against the forwarded ones."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rich.bar import Bar
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from proxy.inspect import cost_view, usage_view
from proxy.inspect import report_view as rv

BAR_WIDTH = 28


def add_row(table: Table, *cells: RenderableType) -> None:
    """``table.add_row`` with every string cell as plain ``Text``: cells hold client-chosen text
    (models, commands, paths) that rich would otherwise parse as markup (``[/red]`` raises)."""
    table.add_row(*(Text(c) if isinstance(c, str) else c for c in cells))


def _title(row: dict[str, Any]) -> Text:
    when = dt.datetime.fromtimestamp(row.get("created_at") or 0).isoformat(" ", "seconds")
    status = row.get("status")
    colour = "green" if status and status < 400 else "red" if status else "yellow"
    t = Text.assemble(
        (row["id"], "bold"),
        f"  {when}  principal ",
        (str(row.get("principal") or "-"), "yellow"),
        "  session ",
        (str(row.get("session_id") or "-"), "cyan"),
        f"  model {row.get('model') or '-'}  protocol {row.get('protocol') or 'chat'}"
        f"  upstream {row.get('upstream') or '-'}  status ",
        (str(status if status is not None else "in flight"), colour),
    )
    if row.get("stream"):
        t.append("  (stream)")
    return t


def bar_width(console: Console) -> int:
    """Two bars and five number columns must fit the terminal (80 columns included)."""
    return max(6, min(BAR_WIDTH, (console.width - 52) // 2))


def sections_table(row: dict[str, Any], width: int = BAR_WIDTH) -> RenderableType:
    secs = rv.sections(row)
    if not secs:
        return Text("Sections: none (the request ended before the rules ran)", style="dim")
    scale = max([1, *(max(s["before"], s["after"]) for s in secs)])
    table = Table(title="Sections (tokens): as sent → as forwarded", title_justify="left")
    table.add_column("section")
    table.add_column("before", justify="right")
    table.add_column("", width=width)
    table.add_column("after", justify="right")
    table.add_column("", width=width)
    table.add_column("Δ", justify="right")
    for s in secs:
        delta = s["after"] - s["before"]
        add_row(
            table,
            s["name"],
            str(s["before"]),
            Bar(scale, 0, s["before"], width=width, color="blue"),
            str(s["after"]),
            Bar(scale, 0, s["after"], width=width, color="green"),
            Text(f"{delta:+d}" if delta else "", style="red" if delta > 0 else "green"),
        )
    table.caption = billed_line(row)
    return table


def billed_line(row: dict[str, Any]) -> str:
    """The request's total as the provider bills it (system, tools schema, messages), and what
    it is made of."""
    bb, ba = rv.billed(row, "before") or 0, rv.billed(row, "after") or 0
    tb, ta = row.get("tokens_before") or 0, row.get("tokens_after") or 0
    tools_b, tools_a = rv.tools_tokens(row, "before"), rv.tools_tokens(row, "after")
    tools = f"{tools_b}" if tools_b == tools_a else f"{tools_b} → {tools_a}"
    return (
        f"{rv.BILLED_LABEL} {bb} → {ba} tokens"
        + (f" ({ba - bb:+d})" if ba != bb else "")
        + f" = messages {tb} → {ta} + tools schema {tools}"
    )


def items_table(title: str, rows: list[dict[str, Any]]) -> RenderableType:
    if not rows:
        return Text(f"{title}: none", style="dim")
    table = Table(title=f"{title} ({len(rows)})", title_justify="left")
    cols = rv.item_columns(rows)
    for c in cols:
        table.add_column(Text(c), overflow="fold")
    for r in rows:
        add_row(table, *(rv.cell(r.get(c)) for c in cols))
    return table


def pruning_view(report: dict[str, Any]) -> RenderableType:
    rows = rv.items(report, "pruning")
    stages = rv.freed_by_stage(report)
    parts: list[RenderableType] = [items_table("Pruning", rows)]
    if stages:
        summary = ", ".join(f"{k} {v}" for k, v in sorted(stages.items()))
        parts.append(Text(f"tokens freed by stage: {summary} (total {sum(stages.values())})"))
    return Group(*parts)


def working_set_view(report: dict[str, Any]) -> RenderableType:
    lines = rv.working_set_lines(report)
    if not lines:
        return Text("Working set: none", style="dim")
    table = Table(title="Working set", title_justify="left", show_header=False)
    table.add_column("key", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for label, values in lines:
        add_row(table, label, "\n".join(values) or "-")
    return table


def workspace_view(report: dict[str, Any]) -> RenderableType:
    view = rv.workspace_view(report)
    if view is None:
        return Text("Workspace map: none", style="dim")
    facts, tree = view
    table = Table(title="Workspace map", title_justify="left", show_header=False)
    table.add_column("key", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for label, value in facts:
        add_row(table, label, value)
    if tree:
        add_row(table, "tree", "\n".join(tree))
    return table


def references_view(report: dict[str, Any]) -> RenderableType:
    refs = rv.items(report, "references")
    if not refs:
        return Text("Resolved references: none", style="dim")
    out = Text(f"Resolved references ({len(refs)})\n", style="italic")
    for ref in refs:
        out.append("  " + rv.reference_text(ref) + "\n")
    return out


def timings_table(report: dict[str, Any]) -> RenderableType:
    entries = rv.timings(report)
    if not entries:
        return Text("Timings: none", style="dim")
    scale = max([0.001, *(ms for _, ms in entries)])
    table = Table(title="Time per rule (ms)", title_justify="left")
    table.add_column("rule")
    table.add_column("ms", justify="right")
    table.add_column("", width=BAR_WIDTH)
    for name, ms in entries:
        add_row(table, name, f"{ms:.3f}", Bar(scale, 0, ms, width=BAR_WIDTH, color="magenta"))
    return table


def usage_table(row: dict[str, Any]) -> RenderableType:
    table = Table(title="Tokens, cache and latency", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    error = None
    for key, value in usage_view.usage_summary(row):
        if key == "error":  # long text: under the table, not stretching the number column
            error = Text(f"error: {value}", style="red")
            continue
        add_row(table, key, "-" if value is None else rv.cell(value, 300))
    return Group(table, error) if error else table


def cache_view(row: dict[str, Any]) -> RenderableType:
    """The request's cache line: outcome, cause, re-billed tokens, a compaction's payback."""
    lines = cost_view.cache_lines(row)
    if not lines:
        return Text("Cache: no attribution (no answer, or logged before it was kept)", style="dim")
    return Text("\n".join(lines))


def diff_view(row: dict[str, Any]) -> RenderableType:
    diff = rv.message_diff(row)
    if diff is None:
        return Text(
            "Diff of what was sent and forwarded: payloads not captured "
            "(set store.capture_payloads: true)",
            style="dim",
        )
    out = Text()
    for entry in diff:
        if entry["op"] == "same":
            out.append(entry["title"] + "\n", style="dim")
            continue
        out.append(entry["title"] + "\n", style="bold")
        for line in entry["lines"]:
            style = "red" if line.startswith("-") else "green" if line.startswith("+") else ""
            out.append(line + "\n", style=style)
    if not diff:
        out.append("no messages\n", style="dim")
    return Panel(out, title="What the client sent → what was forwarded", title_align="left")


def render(row: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    row = rv.for_terminal(row)  # every string came from a request: no terminal escapes
    report = rv.report_of(row)
    console.print(_title(row))
    console.print(sections_table(row, bar_width(console)))
    console.print(usage_table(row))
    console.print(cache_view(row))
    console.print(items_table("Repairs", rv.items(report, "repairs")))
    console.print(items_table("Loops", rv.items(report, "loops")))
    console.print(items_table("Entities the references point to", rv.referenced_entities(report)))
    console.print(
        items_table("New entities (this request's tool calls)", rv.items(report, "entities"))
    )
    console.print(references_view(report))
    console.print(working_set_view(report))
    console.print(workspace_view(report))
    console.print(pruning_view(report))
    for key, title in (("warnings", "Warnings"), ("rule_errors", "Rule errors")):
        if rv.items(report, key):
            console.print(items_table(title, rv.items(report, key)))
    console.print(timings_table(report))
    console.print(diff_view(row))
