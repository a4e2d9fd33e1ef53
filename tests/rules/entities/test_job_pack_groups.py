"""A pack's background-job patterns must carry the groups their readers take: refused when
loaded, not an error on every matching call later."""

from __future__ import annotations

import re

import pytest

from rules.activity.background_jobs import load_jobs, started_job


def _compile(source: str, where: str) -> re.Pattern[str]:
    return re.compile(source)


def test_a_started_pattern_without_the_job_group_is_refused_at_load() -> None:
    with pytest.raises(ValueError, match=r"started\[0\].*job"):
        load_jobs({"started": [r"shell id: (\w+)"]}, _compile)


def test_a_status_pattern_without_the_status_group_is_refused_at_load() -> None:
    with pytest.raises(ValueError, match=r"status.*status"):
        load_jobs({"status": r"<status>(\w+)</status>"}, _compile)


def test_patterns_with_their_groups_load_and_read() -> None:
    rules = load_jobs(
        {"detach_args": ["run_in_background"], "started": [r"shell id: (?P<job>\w+)"]}, _compile
    )
    assert started_job(rules, {"run_in_background": True}, "Started, shell id: ab12") == "ab12"
