"""Protected evidence: the tool results pruning must never elide or drop. The latest failing test
output, the latest build error (and the latest crash), the plan, the latest folder tree, the last
few write results, and the original task (the first user message)."""

from __future__ import annotations

from dataclasses import dataclass

from rules.activity import diagnostics
from rules.activity.observations import Observation
from rules.base import Message
from rules.messages import role, text_of


@dataclass(frozen=True)
class Evidence:
    protected: dict[int, str]  # message index -> why it is protected
    latest_test_failure: int | None
    latest_build_error: int | None
    first_user: int | None


def outcome(messages: list[Message], obs: Observation) -> diagnostics.RunOutcome | None:
    """The parsed outcome of a run; None for results that are not runs (reads, writes …)."""
    if obs.action.kind not in ("run", "other"):
        return None
    return diagnostics.parse(text_of(messages[obs.result_index].get("content")), obs.exit_code)


def find(
    messages: list[Message], observations: list[Observation], last_writes: int = 3
) -> Evidence:
    protected: dict[int, str] = {}
    first_user = next((i for i, m in enumerate(messages) if role(m) == "user"), None)
    if first_user is not None:
        protected[first_user] = "original task"
    test = build = crash = plan = tree = None
    writes: list[int] = []
    for obs in observations:
        kind = obs.action.kind
        if kind == "plan":
            plan = obs.result_index
        elif kind == "list":
            tree = obs.result_index
        elif kind == "write":
            writes.append(obs.result_index)
        result = outcome(messages, obs)
        if result is None or result.verdict != "fail":
            continue
        if result.is_test_failure:
            test = obs.result_index
        elif result.is_build_error:
            build = obs.result_index
        elif "runtime" in result.categories:
            crash = obs.result_index
    named = (
        (plan, "plan"),
        (tree, "latest folder tree"),
        (crash, "latest error"),
        (build, "latest build error"),
        (test, "latest failing test output"),
    )
    for index in writes[-last_writes:] if last_writes else []:
        protected[index] = "recent write"
    for found, why in named:
        if found is not None:
            protected[found] = why
    return Evidence(protected, test, build, first_user)
