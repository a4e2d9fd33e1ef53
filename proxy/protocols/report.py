"""What a protocol adapter adds to the request's report: the protocol, the repairs it made in
the protocol's own terms, the sizes of what the chat view does not show (thinking, reasoning),
and the final integrity check of the body as forwarded."""

from __future__ import annotations

import logging
from typing import Any, cast

from proxy.protocols.base import Adapter, Lowered
from rules.base import TokenCounter
from rules.report import Repair, Report

log = logging.getLogger("ctxproxy.protocols")


def describe_lift(
    adapter: Adapter,
    body: dict[str, Any],
    forwarded: dict[str, Any],
    lowered: Lowered,
    report: Report,
    tokens: TokenCounter,
) -> None:
    report["protocol"] = adapter.name
    if lowered.repairs:
        adapters = cast(list[Repair], lowered.repairs)  # built in the rules' report shape
        report["repairs"] = [*adapters, *(report.get("repairs") or [])]
    hidden = adapter.hidden_text(body, lowered)
    if hidden:
        after = adapter.hidden_text(forwarded, lowered) if forwarded is not body else hidden
        sections = report.setdefault("sections", {})
        for name, text in hidden.items():
            before = tokens.count_text(text)
            kept = after.get(name)
            sections[name] = {
                "before": before,
                "after": before if kept == text else tokens.count_text(kept or ""),
            }
    violations = adapter.violations(forwarded, lowered) if forwarded is not body else []
    if violations:
        log.error("the forwarded %s body fails its integrity check: %s", adapter.name, violations)
        report["integrity"] = violations[:20]
