"""bench/next_action_bound.py: the share of copied literals any pruning could keep at a budget,
from what it must forward (system, protected evidence, the current turn) and each literal's
source result."""

from __future__ import annotations

import json
from typing import Any

from bench.next_action_bound import judge


def _call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def _conversation(filler_lines: int) -> dict[str, Any]:
    """Read a large file, run a command (its output becomes old), then edit a line the read
    showed: the edit copies it from the read, two turns back."""
    body = "\n".join(
        [f"value_{i} = compute_value({i})  # filler" for i in range(filler_lines)]
        + ["def parse_header_line(line):"]
    )
    return {
        "id": "synthetic",
        "messages": [
            {"role": "system", "content": "You fix bugs."},
            {"role": "user", "content": "Fix header parsing"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [_call("a", "Read", file_path="p.py")],
            },
            {"role": "tool", "tool_call_id": "a", "content": body},
            {"role": "assistant", "content": "", "tool_calls": [_call("b", "bash", command="ls")]},
            {"role": "tool", "tool_call_id": "b", "content": "p.py\nREADME"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    _call(
                        "c",
                        "Edit",
                        file_path="p.py",
                        old_str="def parse_header_line(line):",
                        new_str="def parse_header_line(line, strict=0):",
                    )
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "edited"},
        ],
    }


def test_a_source_that_fits_beside_the_floor_counts_and_one_that_does_not_is_lines_only() -> None:
    roomy = judge(_conversation(20), 0, (1.0,))
    assert roomy["share100 literals"] >= 2  # the old_str line and the name it holds
    assert roomy["share100 result fits"] + roomy["share100 in floor"] == roomy["share100 literals"]
    assert roomy["share100 joint"] == roomy["share100 literals"]
    # a budget far smaller than the read: only its lines could be kept
    tight = judge(_conversation(3_000), 0, (0.1,))
    assert tight["share10 result fits"] == 0
    assert tight["share10 lines fit"] == tight["share10 literals"] > 0
    assert tight["share10 fits at depth"] == 0


def test_without_thrash_room_for_growth_stays_free() -> None:
    # at a budget of the largest request, the read fits beside the floor; but it is most of
    # what the session grew by, and half of 5 requests of that growth must stay free
    roomy = judge(_conversation(200), 0, (1.0,))
    assert roomy["share100 joint"] == roomy["share100 literals"] > 0
    assert roomy["share100 joint, no thrash"] == roomy["share100 in floor"] == 0
    # a budget ten times the session leaves that room and the read too
    wide = judge(_conversation(200), 0, (10.0,))
    assert wide["share1000 joint, no thrash"] == wide["share1000 literals"]
