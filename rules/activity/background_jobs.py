"""Jobs a shell tool ran detached (Claude Code's Bash with ``run_in_background``): the job's id
in the detaching call's result, the later calls that name it (reading its output, or stopping
it) and what their results say (its status; a server's banner is read by the caller). The
vocabulary is the ``background_jobs`` section of the ``entities`` pack; pure functions of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_JOB_CHARS = 64  # a job id longer than this is no job id
_READ = 4_000  # characters of a result read for the job id, its status or its end


@dataclass(frozen=True)
class JobRules:
    detach_args: tuple[str, ...]
    started: tuple[re.Pattern[str], ...]
    job_args: tuple[str, ...]
    stop_words: tuple[str, ...]
    stopped: re.Pattern[str] | None
    status: re.Pattern[str] | None
    ended: frozenset[str]

    def patterns(self) -> list[re.Pattern[str]]:
        found = [self.stopped, self.status]
        return [*self.started, *(p for p in found if p is not None)]


def load_jobs(data: Any, compile_one: Callable[[str, str], re.Pattern[str]]) -> JobRules:
    """The pack's ``background_jobs`` section (empty: no job is ever tracked)."""
    spec: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
    where = "entities pack: background_jobs"

    def grouped(source: str, at: str, group: str) -> re.Pattern[str]:
        # a pattern without the group its reader takes would raise on every match: refused here
        pattern = compile_one(source, at)
        if group not in pattern.groupindex:
            raise ValueError(f"{at}: the pattern needs a (?P<{group}>...) group")
        return pattern

    def one(key: str, group: str | None = None) -> re.Pattern[str] | None:
        if not spec.get(key):
            return None
        at = f"{where}.{key}"
        return grouped(str(spec[key]), at, group) if group else compile_one(str(spec[key]), at)

    return JobRules(
        detach_args=tuple(str(a) for a in spec.get("detach_args") or ()),
        started=tuple(
            grouped(str(s), f"{where}.started[{i}]", "job")
            for i, s in enumerate(spec.get("started") or ())
        ),
        job_args=tuple(str(a) for a in spec.get("job_args") or ()),
        stop_words=tuple(str(w).lower() for w in spec.get("stop_words") or ()),
        stopped=one("stopped"),
        status=one("status", "status"),
        ended=frozenset(str(s).lower() for s in spec.get("ended") or ()),
    )


def started_job(rules: JobRules, args: Mapping[str, Any], result: str) -> str | None:
    """The id of the job a shell call detached: its argument asked for it and its result names
    the job, or its first line is the harness's own words for it (a command moved to the
    background when it outlived its timeout): a command's output saying so is not read."""
    detached = any(args.get(a) is True for a in rules.detach_args)
    head = result[:_READ] if detached else result.lstrip()[:_READ].partition("\n")[0]
    for pattern in rules.started:
        m = pattern.search(head)
        if m:
            return m.group("job")
    return None


def named_job(rules: JobRules, name: str, args: Mapping[str, Any]) -> tuple[str, bool] | None:
    """(the job a call names, whether the call stops it): a call with a job argument
    (``bash_id``, ``task_id`` …) reads its output unless its tool's name says it stops it."""
    for key in rules.job_args:
        job = args.get(key)
        if isinstance(job, str) and 0 < len(job) <= MAX_JOB_CHARS:
            lowered = name.lower()
            return job, any(w in lowered for w in rules.stop_words)
    return None


def stopped(rules: JobRules, result: str) -> bool:
    """Whether a stopping call's result says it stopped the job."""
    return rules.stopped is not None and rules.stopped.search(result[:_READ]) is not None


def has_ended(rules: JobRules, result: str) -> bool:
    """Whether an output-reading call's result says the job no longer runs (its status)."""
    m = rules.status.search(result[:_READ]) if rules.status is not None else None
    return m is not None and m.group("status").lower() in rules.ended
