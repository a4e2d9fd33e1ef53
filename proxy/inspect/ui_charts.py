"""Geometry for the /ui charts, computed on the server and drawn as inline SVG by the templates
(no JavaScript, no chart library to fetch: the page works offline)."""

from __future__ import annotations

from typing import Any

PALETTE = {
    "system": "#6c8ebf",
    "tools": "#9673a6",
    "user": "#82b366",
    "assistant": "#d6b656",
    "tool_calls": "#d79b00",
    "tool_results": "#b85450",
    "injected": "#10739e",
    "placeholders": "#999999",
}
EXTRA_COLOURS = ("#4d9078", "#c0504d", "#8064a2", "#f79646", "#4bacc6")
SERIES = (  # (row column, label, colour, dashed): billed input (``report_view.with_billed``)
    ("billed_before", "billed input as sent by the client", "#9aa5b1", False),
    ("billed_after", "billed input as forwarded", "#1f6feb", False),
    ("cached_tokens", "cached upstream", "#2da44e", True),
)


def colour(name: str, i: int) -> str:
    return PALETTE.get(name) or EXTRA_COLOURS[i % len(EXTRA_COLOURS)]


def stacked_bars(sections: list[dict[str, Any]], width: int = 720) -> dict[str, Any]:
    """Two horizontal stacked bars (before, after) on one scale, one segment per section."""
    label_w, bar_h, gap = 70, 28, 14
    plot_w = width - label_w - 90
    totals = {w: sum(s[w] for s in sections) for w in ("before", "after")}
    scale = max(1, *totals.values())
    bars = []
    for row, when in enumerate(("before", "after")):
        x, segments = float(label_w), []
        for i, s in enumerate(sections):
            w = s[when] * plot_w / scale
            if s[when]:
                segments.append(
                    {
                        "name": s["name"],
                        "value": s[when],
                        "x": round(x, 2),
                        "w": round(w, 2),
                        "colour": colour(s["name"], i),
                    }
                )
            x += w
        bars.append(
            {
                "label": when,
                "total": totals[when],
                "y": row * (bar_h + gap),
                "end": round(x, 2),
                "segments": segments,
            }
        )
    legend = [
        {"name": s["name"], "colour": colour(s["name"], i)}
        for i, s in enumerate(sections)
        if s["before"] or s["after"]
    ]
    return {
        "width": width,
        "height": 2 * bar_h + gap,
        "bar_h": bar_h,
        "bars": bars,
        "legend": legend,
    }


def round_ticks(top: int, n: int = 4) -> list[int]:
    """Round gridline values from 0 up to the first one at or above ``top``."""
    step = max(1, top // n)
    magnitude = 10 ** (len(str(step)) - 1)
    step = ((step + magnitude - 1) // magnitude) * magnitude
    ticks = [0]
    while ticks[-1] < top:
        ticks.append(ticks[-1] + step)
    return ticks


def session_chart(
    rows: list[dict[str, Any]], width: int = 760, height: int = 260, first: int = 0
) -> dict[str, Any]:
    """Context size per turn: the billed input the client sent (system, tools schema and
    messages), what was forwarded, what the cache served. ``rows`` carry ``billed_before`` and
    ``billed_after`` (``report_view.with_billed``); ``first``: the turns before them."""
    left, right, top, bottom = 60, 16, 12, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    n = len(rows)
    peak = max([1, *(int(r.get(c) or 0) for r in rows for c, *_ in SERIES)])
    ticks = round_ticks(peak)
    y_top = ticks[-1]

    def xy(i: int, value: Any) -> tuple[float, float]:
        x = left + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)
        y = top + plot_h - plot_h * float(value or 0) / y_top
        return round(x, 2), round(y, 2)

    series = []
    for col, label, col_colour, dashed in SERIES:
        points = [xy(i, r.get(col)) for i, r in enumerate(rows)]
        series.append(
            {
                "label": label,
                "colour": col_colour,
                "dashed": dashed,
                "points": " ".join(f"{x},{y}" for x, y in points),
                "dots": [
                    {"x": x, "y": y, "turn": first + i + 1, "value": rows[i].get(col) or 0}
                    for i, (x, y) in enumerate(points)
                ]
                if n <= 80
                else [],
            }
        )
    every = max(1, n // 12)
    return {
        "width": width,
        "height": height,
        "left": left,
        "right": width - right,
        "top": top,
        "bottom": top + plot_h,
        "series": series,
        "yticks": [{"y": xy(0, t)[1], "label": t} for t in ticks],
        "xticks": [{"x": xy(i, 0)[0], "label": first + i + 1} for i in range(0, n, every)],
    }
