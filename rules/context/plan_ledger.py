"""The plan the working set keeps: a full plan a call's arguments carry (TodoWrite's
``todos``, Codex's ``update_plan``) replaces it; a single-step update (``step`` and ``status``)
finds its step tolerantly, or is appended."""

from __future__ import annotations

from typing import Any

from rules.activity.observations import load_arguments, plan_items
from rules.redact import redact_text

MAX_PLAN_ITEMS = 30  # single-step updates that match no item are appended, up to this many


def update_plan(ledger: dict[str, Any], arguments: str) -> None:
    items = plan_items(arguments)
    if items is not None:
        ledger["plan"] = [{**item, "text": redact_text(item["text"])} for item in items]
        return
    # A single-step update citing a step in other words or another width: match it tolerantly.
    args = load_arguments(arguments)
    keys = ("step", "content", "title", "text")
    step = redact_text(next((args[k] for k in keys if isinstance(args.get(k), str)), ""))
    status = args.get("status") if isinstance(args.get("status"), str) else None
    if not step or not status:
        return
    plan = [dict(p) for p in ledger.get("plan", [])]
    index = _match_step(step, [p["text"] for p in plan])
    if index is None:
        plan.append({"text": step, "status": status})
        while len(plan) > MAX_PLAN_ITEMS:  # the oldest finished item goes first
            done = [i for i, p in enumerate(plan) if p["status"] in ("completed", "done")]
            plan.pop(done[0] if done else 0)
    else:
        plan[index]["status"] = status
    ledger["plan"] = plan


def _match_step(step: str, candidates: list[str]) -> int | None:
    from rules import matching  # tolerant: width, case and whitespace drift, unique containment

    found = matching.match(step, candidates)
    return candidates.index(found.value) if found.value is not None else None
