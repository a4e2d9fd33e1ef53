"""The report's shape, declared once: what the pipeline returns for each request, what
``ctxproxy rewrite`` prints, what the request log stores and what ``show`` and ``/ui`` read.

The report is plain JSON data (it is stored and printed as is), so it is typed with TypedDicts:
a rule builds its fragment as a dict literal (a fragment is a partial ``Report``), the runner
merges fragments (lists appended, other values set), and readers index fields by these names.
``total=False`` marks what a request may lack (a rule that is off, or had nothing to say);
``Required`` what an item always has. Shapes holding a ``"from"`` key (a Python keyword) use the
functional syntax."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Required, TypedDict

# One repair of the tool chain (repair_tool_chain, fix_encoding, the final integrity check).
Repair = TypedDict(
    "Repair",
    {
        # orphan_result, unanswered_call, id_drift, duplicate_call_id, … mojibake, integrity_repair
        "kind": Required[str],
        "index": Required[int],  # the message's index in the rule's input
        "tool_call_id": Required[str | None],
        "action": Required[str],
        "new_id": str,  # duplicate_call_id, invalid_call_id: the id the call now has
        "from": str,  # id_drift: the drifted id the result had
        "count": int,  # runaway_turn: calls left out
        "lines": int,  # mojibake: lines repaired
        "cause": str,  # integrity repairs: the repair's own kind
    },
    total=False,
)


class Violation(TypedDict):
    """One violation the chain validator found (``rules.chain.validator``)."""

    kind: str
    index: int
    tool_call_id: str | None
    message: str


class Pruning(TypedDict):
    """One decision of ``prune``: a result capped, superseded, masked or a turn dropped."""

    index: int
    tool_call_id: str | None
    action: str
    reason: str
    tokens_freed: int


class EntityRef(TypedDict, total=False):
    """The entity a reference points to."""

    type: Required[str]  # file | folder | any other kind (branch, process, customer …)
    name: Required[str]
    path: Required[str]  # a file's path; beyond files the key kind:id
    action: Required[str]
    id: str  # beyond files: the identifier (branch name, short SHA, PID, customer id …)
    description: str  # beyond files: what it is and which call made it


class Pointer(TypedDict, total=False):
    """A resolved reference as a self-contained pointer (what a sub-agent is handed)."""

    description: Required[str]
    id: Required[str]
    kind: Required[str]
    session: Required[str]  # the session whose entity it is
    session_path: Required[list[str]]  # the sessions searched, from the request's own to that one
    confidence: Required[float]
    described_by: str  # the resolver model that wrote ``description`` (absent: the rule did)


class ChainStep(TypedDict, total=False):
    """One step of a reference's resolution: a session searched, or the resolver model's pick."""

    session: str
    depth: int  # 0: the request's own session; n: its n-th ancestor
    candidates: int  # a search: how many entities fit
    resolver: str | None  # a pick: the model that made it


class Reference(TypedDict, total=False):
    mention: Required[str]
    lang: Required[str]
    kind: Required[str]
    confidence: float
    chain: list[ChainStep]
    entity: EntityRef | None  # None: abstained
    call_id: str | None  # the call that made the entity
    abstained: str  # ambiguous | low_confidence | no_candidate | kind_mismatch | newer_unnamed
    # | forgotten | ruled_out | too_recent | order_unread
    candidates: list[str]  # with an abstention: paths that fit (up to 5)
    resolved_by: str  # resolver_model: an abstention settled by its pick
    pointer: Pointer  # a resolved reference: description, id, source session, confidence
    age_s: int  # a resolved reference: seconds between its entity's call and the question
    since: str  # deleted | moved: what a call after the question did to its entity (ref_since)


# One entity event of this request (track_entities).
Entity = TypedDict(
    "Entity",
    {
        "type": Required[str],  # file | folder
        "name": Required[str],
        "path": Required[str],
        "action": Required[str],
        "call_id": Required[str],
        "from": str,  # copy, move: the source
    },
    total=False,
)


class WorkingSetSummary(TypedDict):
    goal: str | None  # the ledger's text (redacted, clipped to max_goal_chars); None: none yet
    instruction: str | None  # the latest instruction, when it differs from the goal
    changed_files: list[str]
    latest_writes: list[str]
    open_diagnostics: list[dict[str, Any]]
    plan: list[dict[str, Any]]
    next_target: str | None


class WorkspaceSummary(TypedDict, total=False):
    """The workspace map after this request (``workspace_map``)."""

    source: Required[str]  # observed | bootstrap | observed+bootstrap | none
    root: str  # the folder paths are shown relative to ("" when none is shared)
    entries: int  # files and folders in the map
    files: int
    folders: int
    changed: int  # files the agent changed
    bytes: int  # the map's size as stored, when this request changed it
    left_out: dict[str, int]  # evicted: entries dropped to keep the map under its bound
    tree: list[str]  # the map, folded (``render.tree_lines``), when this request changed it
    unchanged: bool  # this request read nothing new: no tree (the last change's shows it)
    bootstrap: dict[str, Any]  # the picture taken on this request: root, ms, left_out, error


class ScheduleSummary(TypedDict, total=False):
    """Why prune compacted or not: the cache state and the figures of the choice (costs in fresh
    input tokens)."""

    cache: str  # warm | cold | unknown
    why: str
    # none | cold | paid | expected (bet_on_length) | forced | held (over the budget, the
    # session's last compaction fewer than 5 requests ago)
    decision: str
    # what a cut would have done: over (none fits the budget) | floor (none leaves 5 requests
    # of growth) | spacing (one would, the session having grown faster than the last cut left)
    held: str
    read_ratio: float
    horizon: float  # expected remaining requests
    ahead: float  # bet_on_length: the survival estimate of the requests still to come
    growth: float  # tokens added per request
    bust_cost: int  # what this request pays extra for the compaction
    expected_saving: int  # over the horizon
    expected_cost: int  # forced: this request's bill, the expected losses and the horizon's
    goal: int  # over the budget: the size that leaves room for 5 requests of growth
    before: int  # over the budget: the request's tokens before the cut
    deepest: int  # over the budget: the tokens left were every step taken (the floor)
    deepest_spare: int  # the same without the turns dropped only to fit the budget


class PruneSummary(TypedDict, total=False):
    skipped: str  # provider-owned state: nothing pruned
    budget: int | None
    compacted: bool
    compacted_from: str  # the anchor of the earliest message the compaction changed
    restored: int  # messages a forced compaction showed again (``rules/context/restore.py``)
    tools_tokens: int
    target: int
    min_gain: int
    reserve: int
    stages: dict[str, int]  # stage -> tokens freed
    tokens_after: int
    over_budget: bool
    compactions: int
    edits: int
    dropped: int
    schedule: ScheduleSummary
    inject_tokens: int  # inject's stored blocks, replayed in the prompt
    conversation: str  # the conversation's root (its first message's hash, cut), per session
    opening: str  # its first message past the system prompt's hash, cut ("" for none)


class InjectSummary(TypedDict, total=False):
    position: str  # append | message
    index: int
    tokens: int
    entities: int  # lines of "Recent context"
    references: int  # lines of "Resolved references"
    room: int  # tokens left under the budget for the block
    shrunk: bool
    skipped: str  # why nothing was injected
    sticky: int  # blocks forwarded before, replayed in place
    added: bool  # this request added a block (at the tail)
    delta: bool  # the added block says only what changed since the blocks before it
    collapsed: int  # stored blocks dropped after a compaction (a whole block replaces them)
    lost: int  # stored blocks whose message left the conversation


class LoopReport(TypedDict, total=False):
    """A loop break_loops broke on this request: the note it added inside the newest repeat."""

    kind: Required[str]  # repeated_failure | no_progress | oscillation
    count: Required[int]  # repeats (oscillation: cycles)
    call: Required[str]  # the repeated call, short
    note: Required[str]  # the note as forwarded
    candidates: Required[list[str]]  # receipts of a lookup miss, in the note's order
    index: int  # the result's index in the rule's input
    since: int  # the 1-based message number of the loop's first call
    near_miss: str  # the candidate the tolerant matcher found for what the call cited
    elided: bool  # the repeated body was elided to its first and last lines


class ReportWarning(TypedDict, total=False):
    kind: Required[str]  # over_budget | budget_below_floor | integrity_repair
    tokens: int  # over_budget: the request's tokens (messages and tools schema)
    budget: int | None
    # budget_below_floor (once per session): what every request carries, and its parts
    floor: int
    system: int
    tools: int
    protected: int
    note: str
    rule: str  # over_budget after inject (prune's warning has none)
    violations: list[Violation]  # integrity_repair: the first 20
    count: int  # integrity_repair: how many in all


class RuleError(TypedDict):
    rule: str
    error: str  # "ExceptionType: message"


class Tokens(TypedDict):
    before: int
    after: int
    budget: int | None


class Section(TypedDict):
    before: int
    after: int


class CacheSummary(TypedDict):
    """The cost facts the proxy used for this request (``rules.base.CacheFacts``)."""

    read_ratio: float  # a cached token's price as a share of a fresh one
    write_ratio: float
    ttl_s: float
    min_prefix: int
    source: str  # config | litellm | default
    last_cached_tokens: int | None  # the session's previous request, as the upstream reported
    last_cache_write_tokens: int | None
    idle_s: float | None  # since that request was sent


class RescueSummary(TypedDict, total=False):
    """An upstream's "prompt too long" answer, and the one retry the proxy made after it."""

    window: int | None  # the window the upstream stated
    learned: int  # the window kept for the model from now on: the stated one, at least its floor
    budget: int  # the budget of the second rewrite (this request's only: in the proxy's count)
    tokens_before: int  # what the first forwarded request counted (messages and tools)
    tokens_after: int  # what the second one counts
    retried: Required[bool]
    outcome: Required[str]  # fitted | failed_again | floor_too_big | no_window | no_gain
    status: int  # the retry's status


MAX_REPORTED_ENTITIES = 200  # a log row's list is bounded, whatever one call makes
MAX_LISTED = 200  # a stored report's lists: the first of each, and ``<key>_more``


class Report(TypedDict, total=False):
    session: str
    tokens: Tokens
    sections: dict[str, Section]
    repairs: list[Repair]
    entities: list[Entity]  # at most ``MAX_REPORTED_ENTITIES``, the first of the request's
    entities_more: int  # the request's other entity events, not listed
    references: list[Reference]
    working_set: WorkingSetSummary
    workspace: WorkspaceSummary
    pruning: list[Pruning]
    pruning_more: int  # a stored report: the decisions past ``MAX_LISTED`` (``bounded_report``)
    repairs_more: int
    prune: PruneSummary
    inject: InjectSummary
    loops: list[LoopReport]  # break_loops: loops broken on this request
    warnings: list[ReportWarning]
    rule_errors: list[RuleError]
    history_restored: int
    resolver: dict[str, Any]  # the optional resolver model's answer, when it was asked
    cache: CacheSummary  # the cost model's facts (set by the proxy, not a rule)
    rescue: RescueSummary  # an upstream overflow and its retry (set by the proxy)
    prefix_reuse: float | None
    prefix_shared_messages: int
    lineage: dict[str, Any]  # a fork: the checkpoint the request's branch resumed from (proxy)
    timings_ms: dict[str, float]
    protocol: str  # the inbound protocol, when not chat (set by the proxy's adapter)
    integrity: list[str]  # what the forwarded body's own protocol check found wrong


def bounded_report(report: Report) -> Report:
    """``report`` as a log row keeps it: each list its first ``MAX_LISTED`` items, and how many
    more it held as ``<key>_more``. A request of 20,000 messages over the budget made 18,889
    pruning decisions: 2.2 MB a row, redacted on the event loop (174 ms) and stored. The report
    itself is returned when no list is longer."""
    over = [k for k, v in report.items() if isinstance(v, list) and len(v) > MAX_LISTED]
    if not over:
        return report
    out: dict[str, Any] = dict(report)
    for key in over:
        items = out[key]
        out[key] = items[:MAX_LISTED]
        out[f"{key}_more"] = len(items) - MAX_LISTED + int(out.get(f"{key}_more") or 0)
    return out  # type: ignore[return-value]  # the same keys, lists shortened


def listed_count(report: Mapping[str, Any], key: str) -> int:
    """How many items a (possibly bounded) report's list ``key`` held."""
    items = report.get(key)
    more = report.get(f"{key}_more")
    return (len(items) if isinstance(items, list) else 0) + (more if isinstance(more, int) else 0)


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


def merge_report(report: Report, fragment: Report) -> None:
    """``fragment`` (a partial report) into ``report``: list values appended, others set."""
    if not fragment:  # most rules' most requests: nothing to report
        return
    into: dict[str, Any] = report  # type: ignore[assignment]  # a TypedDict: literal keys only
    for key, value in fragment.items():
        if isinstance(value, list):
            kept = into.get(key)
            if isinstance(kept, list):
                kept.extend(value)
                continue
        into[key] = value
