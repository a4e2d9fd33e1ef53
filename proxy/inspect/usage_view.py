"""A request's usage and cost facts, as ``show`` and the /ui request page list them: status,
billed input before and after, the upstream's usage, timings, the cost model's facts, the
compaction decision, injected blocks, cache breakpoints and an overflow rescue."""

from __future__ import annotations

from typing import Any

from proxy.inspect.report_view import BILLED_LABEL, billed, cell, report_of, tools_tokens


def upstream_ms(row: dict[str, Any]) -> float | None:
    """Time spent upstream: total latency minus what the proxy added before forwarding."""
    latency, overhead = row.get("latency_ms"), row.get("overhead_ms")
    if latency is None or overhead is None or not row.get("upstream"):  # never forwarded
        return None
    return max(0.0, float(latency) - float(overhead))


def usage_summary(row: dict[str, Any]) -> list[tuple[str, Any]]:
    report = report_of(row)
    tokens = found if isinstance(found := report.get("tokens"), dict) else {}
    up = upstream_ms(row)
    pairs: list[tuple[str, Any]] = [
        ("status", row.get("status")),
        (f"{BILLED_LABEL} before", billed(row, "before")),
        (f"{BILLED_LABEL} after", billed(row, "after")),
        ("of which tools schema", _tools_pair(row)),
        ("messages before", row.get("tokens_before")),
        ("messages after", row.get("tokens_after")),
        ("budget", tokens.get("budget")),
        ("prefix reuse", report.get("prefix_reuse")),
        ("prompt tokens (upstream)", row.get("prompt_tokens")),
        ("cached tokens", row.get("cached_tokens")),
        ("cached share", _share(row.get("cached_tokens"), row.get("prompt_tokens"))),
        ("completion tokens", row.get("completion_tokens")),
        ("overhead ms", row.get("overhead_ms")),
        ("upstream ms", round(up, 3) if up is not None else None),
        ("latency ms", row.get("latency_ms")),
        ("ttfb ms", row.get("ttfb_ms")),
    ]
    pairs.extend(_cost_pairs(report))
    if row.get("error_type"):
        pairs.append(("error", f"{row['error_type']}: {cell(row.get('error'), 300)}"))
    if row.get("client_disconnected"):
        pairs.append(("client disconnected", True))
    return pairs


def _tools_pair(row: dict[str, Any]) -> str | None:
    before, after = tools_tokens(row, "before"), tools_tokens(row, "after")
    if row.get("tokens_before") is None:
        return None
    return str(before) if before == after else f"{before} → {after}"


def _cost_pairs(report: dict[str, Any]) -> list[tuple[str, Any]]:
    """The cost model's facts and an overflow rescue, when the report has them."""
    pairs: list[tuple[str, Any]] = []
    cache = report.get("cache")
    if isinstance(cache, dict):
        pairs += [
            ("cache read ratio", f"{cache.get('read_ratio')} ({cache.get('source')})"),
            ("cache ttl s", cache.get("ttl_s")),
            ("cache min prefix", cache.get("min_prefix")),
            ("last cached tokens", cache.get("last_cached_tokens")),
            ("idle s", cache.get("idle_s")),
        ]
    prune = report.get("prune")
    plan = prune.get("schedule") if isinstance(prune, dict) else None
    if isinstance(plan, dict):
        held = plan.get("held")  # over the budget, not cut: what a cut would have done
        decision = f"{plan.get('decision')}: {held}" if held else plan.get("decision")
        pairs.append(
            (
                "compaction",
                f"{decision} (cache {plan.get('cache')}: {plan.get('why')}; "
                f"bust {plan.get('bust_cost')}, saving {plan.get('expected_saving')}, "
                f"horizon {plan.get('horizon')} requests)",
            )
        )
    inject = report.get("inject")
    if isinstance(inject, dict) and ("sticky" in inject or inject.get("added")):
        added = ("delta" if inject.get("delta") else "whole") if inject.get("added") else "none"
        pairs.append(("injected blocks", f"{inject.get('sticky', 0)} replayed, added: {added}"))
    marks = report.get("breakpoints")
    if isinstance(marks, dict):
        pairs.append(("cache breakpoints", ", ".join(map(str, marks.get("placed") or [])) or "-"))
    rescue = report.get("rescue")
    if isinstance(rescue, dict):
        pairs.append(
            (
                "overflow rescue",
                f"{rescue.get('outcome')}: window {rescue.get('window')}, "
                f"{rescue.get('tokens_before')} → {rescue.get('tokens_after')} tokens",
            )
        )
    return pairs


def _share(part: Any, whole: Any) -> str | None:
    """Share of the prompt the upstream served from its cache (cached input costs ~10%)."""
    if not isinstance(part, (int, float)) or not isinstance(whole, (int, float)) or whole <= 0:
        return None
    return f"{part / whole:.0%}"
