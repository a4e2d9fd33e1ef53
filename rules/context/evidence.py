"""Protected evidence: the tool results pruning must never elide or drop. The latest failing test
output, the latest build error (and the latest crash), the plan, the latest folder tree, the last
few write results, the messages loading deferred tools (``LOADS_TOOLS``), and the original task:
the first user message that is the client's request, not a harness's wrapper around the
environment (Codex's ``<environment_context>``, a ``<system-reminder>``, an ``AGENTS.md``
preamble), which is protected as well."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rules.activity import diagnostics
from rules.activity.observations import Observation
from rules.base import Message
from rules.messages import LOADS_TOOLS, role, text_of


@dataclass(frozen=True)
class Evidence:
    protected: dict[int, str]  # message index -> why it is protected
    latest_test_failure: int | None
    latest_build_error: int | None
    first_user: int | None  # the original task's message (turns begin after it)


# a harness's wrapper: the whole text is one element of a lowercase tag (bounded: the name only)
_WRAPPER_OPEN = re.compile(r"<([a-z][a-z0-9_ -]{0,40})>")
_PREAMBLES = ("# AGENTS.md instructions", "<INSTRUCTIONS>")


def is_wrapper(text: str) -> bool:
    """Whether ``text`` is a harness's wrapper rather than words of the user: one element of a
    lowercase tag from start to end, or a known instructions preamble."""
    text = text.strip()
    if text.startswith(_PREAMBLES):
        return True
    opened = _WRAPPER_OPEN.match(text)
    return opened is not None and text.endswith(f"</{opened.group(1)}>")


def _texts(message: Message) -> list[str]:
    content = message.get("content")
    if isinstance(content, list):
        parts = [p for p in content if isinstance(p, dict)]
        return [p["text"] for p in parts if isinstance(p.get("text"), str)]
    return [text_of(content)]


def users_own(message: Message) -> bool:
    """Whether a user's message holds some words of the user: a text that is no wrapper."""
    return any(t.strip() and not is_wrapper(t) for t in _texts(message))


def task_index(messages: list[Message], first_user: int | None) -> int | None:
    """The first user message holding the client's own words (some text that is not a
    wrapper), from ``first_user`` on; None when there is none."""
    if first_user is None:
        return None
    for i in range(first_user, len(messages)):
        m = messages[i]
        if role(m) == "user" and users_own(m):
            return i
        if role(m) == "assistant":
            break  # the agent answered: whatever came before was the request
    return None


def task_start(messages: list[Message]) -> int | None:
    """Where the original task is: the task message, else the first user message."""
    first_user = next((i for i, m in enumerate(messages) if role(m) == "user"), None)
    task = task_index(messages, first_user)
    return first_user if task is None else task


def outcome(messages: list[Message], obs: Observation) -> diagnostics.RunOutcome | None:
    """The parsed outcome of a run; None for results that are not runs (reads, writes …)."""
    if obs.action.kind not in ("run", "other"):
        return None
    return diagnostics.parse(text_of(messages[obs.result_index].get("content")), obs.exit_code)


def _open(failure: int | None, failed: dict[int, str], passed: str) -> int | None:
    """A failure, unless it is a run of the command that has just passed."""
    return None if failure is not None and failed[failure] == passed else failure


def find(
    messages: list[Message], observations: list[Observation], last_writes: int = 3
) -> Evidence:
    protected: dict[int, str] = {}
    first_user = next((i for i, m in enumerate(messages) if role(m) == "user"), None)
    task = task_index(messages, first_user)
    if first_user is not None:
        # a harness's wrappers before the task stay too (small, and the cache's stable head)
        for i in range(first_user, first_user if task is None else task):
            if role(messages[i]) == "user":
                protected[i] = "environment"
        task = first_user if task is None else task
        protected[task] = "original task"
    test = build = crash = plan = tree = None
    writes: list[int] = []
    failed: dict[int, str] = {}  # a failed run's result -> its command
    for obs in observations:
        kind = obs.action.kind
        if kind == "plan":
            plan = obs.result_index
        elif kind == "list":
            tree = obs.result_index
        elif kind == "write":
            writes.append(obs.result_index)
        result = outcome(messages, obs)
        if result is None:
            continue
        if result.verdict == "pass":  # a later run of a failed command passing closes it:
            ran = obs.action.target  # its red output is no longer what the agent works from
            test, build, crash = (_open(test, failed, ran), _open(build, failed, ran),
                                  _open(crash, failed, ran))  # fmt: skip
            continue
        if result.verdict != "fail":
            continue
        failed[obs.result_index] = obs.action.target
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
    for i, m in enumerate(messages):  # the deferred tools they load: gone, the model loses them
        if LOADS_TOOLS in m:
            protected[i] = "loaded tools"
    return Evidence(protected, test, build, task)
