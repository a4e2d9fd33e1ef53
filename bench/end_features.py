"""Generic features of a request that any tool-using agent shows, for ``bench.end_odds``: does
the request say the session is about to end? None names one agent's private strings (a
harness's submit command, a tool of one framework): test output, diffs, the agent's prose, the
shape of its recent calls and of the session's growth.

Each feature is a number; ``FEATURES`` lists them in the order ``features`` returns them."""

from __future__ import annotations

import math
import re
from typing import Any

from rules.messages import call_arguments_text, call_name, role, text_of, tool_calls

FEATURES = (
    "pass_last",  # the last results show tests passing, no failure
    "fail_last",  # the last results show a failure or a traceback
    "diff_last",  # the last result is a diff (a review of the change)
    "done_prose",  # the agent's last prose announces completion
    "final_prose",  # the agent's last prose speaks of a final check or of verifying
    "repeat",  # share of the last 6 calls whose arguments were sent before
    "since_edit",  # log(1 + requests since the last call that wrote a file)
    "since_new_path",  # log(1 + requests since a call first named a path)
    "last_result",  # log(1 + characters of the last result)
    "last_turn",  # log(1 + characters of the agent's last turn: prose and calls)
    "growth",  # characters added over the last 5 requests ÷ 5 × the session's mean
    "edits",  # share of the calls that wrote a file
)

_PASS = re.compile(r"\b\d+ passed\b|\bOK\b|\bPASS(?:ED)?\b|\ball tests pass|\btests? passed", re.I)
_FAIL = re.compile(
    r"\bFAIL(?:ED|URE)?\b|Traceback \(most recent|\b\d+ failed\b|\bError:|\berrors?="
)
_DIFF = re.compile(r"^diff --git |^--- a/|^\+\+\+ b/|^@@ -\d", re.M)
_DONE = re.compile(
    r"\b(?:complete[sd]?|done|finished|successfully|in summary|summary of|all tests pass\w*|"
    r"resolved|implemented|verified|works (?:correctly|as expected))\b",
    re.I,
)
_FINAL = re.compile(
    r"\b(?:final(?:ly)?|one (?:more|last) time|double[- ]check|verif(?:y|ied|ication)|confirm\w*|"
    r"looks? (?:good|correct)|perfect|great)\b",
    re.I,
)
_EDIT_NAME = re.compile(r"edit|write|replace|patch|create|insert", re.I)
_EDIT_ARGS = re.compile(
    r"sed -i|cat\s*>|cat\s*<<|\btee\b|>\s*[\w./-]+\.\w{1,5}\b|apply_patch|str_replace|\.write\("
)
_PATH = re.compile(r"[\w.-]*/[\w./-]+\.\w{1,5}\b|\b[\w-]+\.(?:py|js|ts|go|rs|c|h|java|rb|md)\b")


def _results(messages: list[dict[str, Any]]) -> list[str]:
    """Texts of the tool results (or user turns after a call) in order."""
    return [text_of(m.get("content")) for m in messages if role(m) == "tool"]


def _calls(messages: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    """(request index, name, arguments) of each call; a request index counts the assistant
    turns before the call's."""
    out: list[tuple[int, str, str]] = []
    turn = 0
    for m in messages:
        if role(m) != "assistant":
            continue
        for c in tool_calls(m):
            out.append((turn, call_name(c), call_arguments_text(c)))
        turn += 1
    return out


def _is_edit(name: str, args: str) -> bool:
    return bool(_EDIT_NAME.search(name) or _EDIT_ARGS.search(args))


def features(messages: list[dict[str, Any]], sizes: list[int]) -> list[float]:
    """``messages``: the request; ``sizes``: the characters of each request of the session so
    far (this one last)."""
    results = _results(messages)
    last2 = "\n".join(results[-2:])
    tail = results[-1] if results else ""
    assistants = [m for m in messages if role(m) == "assistant"]
    last_asst = assistants[-1] if assistants else {}
    prose = text_of(last_asst.get("content"))
    turn_chars = len(prose) + sum(len(call_arguments_text(c)) for c in tool_calls(last_asst))
    calls = _calls(messages)
    turns = len(assistants)
    recent = calls[-6:]
    seen = {a for _, _, a in calls[: len(calls) - len(recent)]}
    repeat = 0.0
    if recent:
        for _, _, a in recent:
            repeat += a in seen
            seen.add(a)
        repeat /= len(recent)
    edit_turns = [t for t, n, a in calls if _is_edit(n, a)]
    since_edit = turns - 1 - edit_turns[-1] if edit_turns else turns
    known: set[str] = set()
    last_new = 0
    for t, _, a in calls:
        paths = set(_PATH.findall(a))
        if paths - known:
            last_new = t
        known |= paths
    mean = sizes[-1] / max(len(sizes), 1)
    back = sizes[-6] if len(sizes) >= 6 else 0
    growth = (sizes[-1] - back) / (5 * mean) if mean > 0 else 0.0
    failed = bool(_FAIL.search(last2))
    return [
        float(bool(_PASS.search(last2)) and not failed),
        float(failed),
        float(bool(_DIFF.search(tail))),
        float(bool(_DONE.search(prose))),
        float(bool(_FINAL.search(prose))),
        repeat,
        math.log1p(max(since_edit, 0)),
        math.log1p(max(turns - 1 - last_new, 0)),
        math.log1p(len(tail)),
        math.log1p(turn_chars),
        growth,
        len(edit_turns) / max(len(calls), 1),
    ]
