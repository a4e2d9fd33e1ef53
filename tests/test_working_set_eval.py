"""``bench.working_set_eval`` runs: on the first mini-swe-agent runs of the corpus, every file of
the submitted diff is among the changed files the working set lists."""

from __future__ import annotations

import pytest

from bench.working_set_eval import main


@pytest.mark.needs_shared
def test_the_changed_files_hold_the_submitted_diff(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "mini-swe-agent runs with a submitted diff: 3" in out
    assert "runs whose changed files miss a file of the diff: 0 (0 files)" in out
