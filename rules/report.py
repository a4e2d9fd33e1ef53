"""The report's shape, declared once: what the pipeline returns for each request, what
``ctxproxy rewrite`` prints, what the request log stores and what ``show`` and ``/ui`` read.

The report is plain JSON data (it is stored and printed as is), so it is typed with TypedDicts:
a rule builds its fragment as a dict literal, the runner merges fragments (lists appended, other
values set), and readers index fields by these names. ``total=False`` marks what a request may
lack (a rule that is off, or had nothing to say)."""

from __future__ import annotations

from typing import Any, TypedDict


class Repair(TypedDict, total=False):
    kind: str  # orphan_result, unanswered_call, id_drift, duplicate_call_id, … integrity_repair
    index: int
    tool_call_id: str | None
    action: str
    cause: str  # integrity repairs: the violation's own kind


class Pruning(TypedDict):
    """One decision of ``prune``: a result capped, superseded, masked or a turn dropped."""

    index: int
    tool_call_id: str | None
    action: str
    reason: str
    tokens_freed: int


class Reference(TypedDict, total=False):
    mention: str
    entity: dict[str, Any] | None
    confidence: float
    chain: list[str]
    resolved: bool


class Entity(TypedDict, total=False):
    type: str  # file | folder
    name: str
    path: str
    action: str
    call_id: str
    # "from" (the source of a copy or move) is a keyword: read it as entity.get("from")


class WorkingSetSummary(TypedDict):
    goal: bool
    instruction: bool
    changed_files: list[str]
    latest_writes: list[str]
    open_diagnostics: list[dict[str, Any]]
    plan: list[dict[str, Any]]
    next_target: str | None


class PruneSummary(TypedDict, total=False):
    skipped: str  # provider-owned state: nothing pruned
    tools_tokens: int
    target: int
    min_gain: int
    reserve: int
    compacted: bool
    stages: dict[str, int]  # stage -> tokens freed
    tokens_after: int
    over_budget: bool
    compactions: int
    edits: int
    dropped: int


class InjectSummary(TypedDict, total=False):
    skipped: str | None
    room: int | None
    position: str
    index: int
    tokens: int


class Tokens(TypedDict):
    before: int
    after: int
    budget: int | None


class Section(TypedDict):
    before: int
    after: int


class Report(TypedDict, total=False):
    session: str
    tokens: Tokens
    sections: dict[str, Section]
    repairs: list[Repair]
    entities: list[Entity]
    references: list[Reference]
    working_set: WorkingSetSummary
    pruning: list[Pruning]
    prune: PruneSummary
    inject: InjectSummary
    warnings: list[dict[str, Any]]
    rule_errors: list[dict[str, str]]
    history_restored: int
    resolver: dict[str, Any]  # the optional resolver model's answer, when it was asked
    prefix_reuse: float | None
    prefix_shared_messages: int
    timings_ms: dict[str, float]


def new_report(session: str) -> Report:
    """The report a request starts with: list fields present (rules append to them)."""
    return Report(
        session=session,
        repairs=[],
        pruning=[],
        entities=[],
        references=[],
        warnings=[],
        rule_errors=[],
        timings_ms={},
    )
