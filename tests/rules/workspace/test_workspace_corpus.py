"""The workspace map on conversations of the real corpus (``bench/workspace_map.py``): after each
request it lists every file the agent read or wrote and did not delete since, and nothing it
deleted; it stays bounded and fast."""

from __future__ import annotations

import pytest

from bench.workspace_map import run


@pytest.mark.slow
@pytest.mark.needs_shared
def test_the_map_holds_what_the_agent_read_and_wrote_and_nothing_it_deleted() -> None:
    figures = run(None)  # every conversation: mini-swe-agent, OpenHands, SWE-agent, Claude Code …
    assert figures["conversations"] == 186 and figures["checks"] > 100_000
    assert figures["coverage"] >= 0.999, figures["missing_examples"]
    assert figures["deleted_still_shown"] == 0, figures["stale_examples"]
    assert figures["state_bytes_max"] < 100_000
