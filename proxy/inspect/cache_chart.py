"""The /ui session page's prompt-cache chart: per request, a bar of the prompt the upstream
billed, split into what its cache served and what it billed in full, with the cause of each fall
(``proxy.attribution``) marked above its bar. Geometry only; the template draws it as SVG."""

from __future__ import annotations

from typing import Any

from proxy.inspect.cost_view import cause_text, line_of
from proxy.inspect.ui_charts import round_ticks

CACHED, UNCACHED = "#2da44e", "#9aa5b1"
CAUSE_MARKS = {  # cause -> (letter, colour)
    "expiry": ("E", "#bf8700"),
    "client": ("C", "#8250df"),
    "proxy": ("P", "#cf222e"),
    "unexplained": ("?", "#57606a"),
    "unknown": ("U", "#57606a"),
}


def cache_chart(
    rows: list[dict[str, Any]], width: int = 760, height: int = 240, first: int = 0
) -> dict[str, Any]:
    """``rows`` in turn order, after ``first`` turns; a request without usage gets no bar."""
    left, right, top, bottom = 60, 16, 22, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    n = max(len(rows), 1)
    prompts = [int((line_of(r) or {}).get("prompt") or r.get("prompt_tokens") or 0) for r in rows]
    ticks = round_ticks(max([1, *prompts]))
    y_top = ticks[-1]
    slot = plot_w / n
    bar_w = max(1.0, min(24.0, slot * 0.7))

    def y(value: float) -> float:
        return round(top + plot_h - plot_h * value / y_top, 2)

    bars, marks = [], []
    for i, (row, prompt) in enumerate(zip(rows, prompts, strict=True)):
        line = line_of(row) or {}
        cached = min(int(line.get("cached") or row.get("cached_tokens") or 0), prompt)
        x = round(left + slot * i + (slot - bar_w) / 2, 2)
        bars.append(
            {
                "turn": first + i + 1,
                "x": x,
                "w": round(bar_w, 2),
                "cached_y": y(cached),
                "cached_h": round(y(0) - y(cached), 2),
                "uncached_y": y(prompt),
                "uncached_h": round(y(cached) - y(prompt), 2),
                "cached": cached,
                "uncached": prompt - cached,
                "outcome": line.get("outcome") or "-",
            }
        )
        cause = line.get("cause")
        if cause in CAUSE_MARKS:
            letter, colour = CAUSE_MARKS[cause]
            marks.append(
                {
                    "turn": first + i + 1,
                    "cause": cause,
                    "letter": letter,
                    "colour": colour,
                    "x": round(x + bar_w / 2, 2),
                    "y": round(y(prompt) - 5, 2),
                    "title": f"turn {first + i + 1}: {cause_text(line)}, re-billed "
                    f"{line.get('rebilled')} tokens",
                }
            )
    every = max(1, n // 12)
    return {
        "width": width,
        "height": height,
        "left": left,
        "right": width - right,
        "bottom": top + plot_h,
        "bars": bars,
        "marks": marks,
        "cached": CACHED,
        "uncached": UNCACHED,
        "legend": [{"cause": c, "letter": m[0], "colour": m[1]} for c, m in CAUSE_MARKS.items()],
        "yticks": [{"y": y(t), "label": t} for t in ticks],
        "xticks": [
            {"x": round(left + slot * i + slot / 2, 2), "label": first + i + 1}
            for i in range(0, len(rows), every)
        ],
    }
