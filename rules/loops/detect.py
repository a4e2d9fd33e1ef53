"""Loops in the recent tool calls. Each answered call becomes a ``Step``: its key (the tool and its
arguments, normalised with ``rules.matching`` so whitespace, width and case drift count as the
same call), its kind (read, list, write, run, plan, other), and its outcome (failed or not, and a
failure signature: exit code, error class, first error line). Three kinds of loop end at a step:

- ``repeated_failure``: the same call failing the same way, with no successful write or run in
  between (re-running a test after a change is work, not a loop); polling commands are left out.
  Edits of one file whose old text is not found count together however that text differs
  (``edit_misses``): an agent rewording the text to replace without re-reading is stuck too;
- ``no_progress``: the same read or listing answering the same text, with nothing in between that
  could have changed it (only reads, listings, plan updates and failed edits);
- ``oscillation``: a cycle of 2 to 4 distinct edits and runs repeated, each cycle failing the
  same way at the same places.

Pure functions of the steps; every regex on client text is applied to single clipped lines."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import orjson

from rules.activity.observations import Observation, load_arguments
from rules.matching import normalize
from rules.messages import PLACEHOLDER_PREFIX
from rules.redact import redact_text

LINE_CHARS = 300  # a line is clipped to this before any pattern sees it
EDGE_LINES = 8  # an error line is looked for among the first and last lines of a result
_ERROR = re.compile(
    r"(?i)^\W{0,3}(?:error|fatal|exception|traceback|failed|failure)\b|\b(?:not found|no such|"
    r"no matching|does not exist|doesn't exist|could not|couldn't|unable to|permission denied|"
    r"rejected|did not match|no match|invalid|syntax error|is required)\b"
)
_NOT_ERROR = re.compile(r"(?i)\b(?:0|no) (?:errors?|failures?|failed)\b|\bwithout errors?\b")
_ERROR_CLASS = re.compile(r"\b([A-Z][A-Za-z0-9_]{0,60}(?:Error|Exception))\b")
_VOLATILE = re.compile(r"0x[0-9a-f]{4,16}|\b\d{1,6}(?:\.\d{1,6})?m?s\b")  # addresses, durations
# an edit's answer when the text it replaces is not in the file (OpenHands' and Anthropic's editor,
# Claude Code's Edit, Gemini CLI's replace, Codex's apply_patch); read on the edge lines only
_EDIT_MISS = re.compile(
    r"(?i)did not appear verbatim|string to replace (?:was )?not found|could not find the string "
    r"to replace|no match found for replacement|failed to find expected lines"
)
_POLLING = re.compile(r"\b(?:sleep|watch|until|wait|timeout)\b|\btail\s+-f")
SEARCH_TOOLS = {
    "grep", "search", "glob", "findfile", "findfiles", "searchfiles", "searchfilecontent",
    "grepsearch", "filesearch", "codebasesearch", "searchdir", "searchfile",
}  # fmt: skip
CHANGES = ("write", "run")


class Outcome(NamedTuple):
    failed: bool
    signature: str  # "" when it did not fail
    error: str  # the first error line as shown (clipped), "" when none


class Step(NamedTuple):
    obs: Observation
    key: str  # normalised tool and arguments
    kind: str  # read | list | write | run | plan | other
    label: str  # the call, short, for the note
    outcome: Outcome
    text: str  # the result's text
    polling: bool
    arguments: str  # the call's arguments as sent
    miss: bool = False  # a failed edit whose text to replace is not in the file


@dataclass(frozen=True)
class Loop:
    kind: str  # repeated_failure | no_progress | oscillation
    count: int  # repeats (oscillation: cycles)
    steps: tuple[Step, ...]  # every step of the loop, oldest first; the last is the newest
    cycle: tuple[Step, ...] = ()  # oscillation: the calls of one cycle, in order
    edits: bool = False  # repeated_failure: edits of one file missing their text, however worded


def call_key(name: str, arguments: str) -> str:
    """The tool and its arguments, keys sorted, normalised (width, case and whitespace drift)."""
    args = load_arguments(arguments)
    canonical = orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode() if args else arguments
    return f"{normalize(name)}\x1f{normalize(canonical)}"


def _lines(text: str) -> list[str]:
    lines = [ln.strip()[:LINE_CHARS] for ln in text.splitlines() if ln.strip()]
    if len(lines) > 2 * EDGE_LINES:
        return lines[:EDGE_LINES] + lines[-EDGE_LINES:]
    return lines


def outcome(obs: Observation, text: str) -> Outcome:
    """Whether the call failed (its exit code, the result's error flag, or, with neither, an
    exception class near the end or an error on the first line: a traceback, a tool's own error
    message), and how: the failure's signature, the same for the same failure (addresses and
    durations masked). A line that only opens the error (``ERROR:``) takes the next one along."""
    lines = _lines(text)
    if (obs.exit_code == 0 and not obs.failed) or not lines:
        return Outcome(obs.failed, f"{obs.exit_code}||" if obs.failed else "", "")
    classed = [k for k, ln in enumerate(lines) if _ERROR_CLASS.search(ln)]
    first = lines[0] if not _NOT_ERROR.search(lines[0]) else ""
    shows = bool(first and _ERROR.search(first)) or (classed[-1:] == [len(lines) - 1])
    if (not (obs.failed or obs.exit_code is not None or shows)) or obs.action.kind == "plan":
        return Outcome(obs.failed, f"{obs.exit_code}||" if obs.failed else "", "")
    at = classed[-1] if classed else 0 if first and _ERROR.search(first) else -1
    error = lines[at] if at >= 0 else ""
    if error and len(error) <= 12 and at + 1 < len(lines):
        error = f"{error} {lines[at + 1]}"
    shown = error or lines[-1]
    classes = sorted({m.group(1) for ln in lines for m in _ERROR_CLASS.finditer(ln)})
    line = _VOLATILE.sub("#", normalize(shown))
    return Outcome(True, f"{obs.exit_code}|{','.join(classes)}|{line}", shown)


def step_kind(obs: Observation) -> str:
    kind = obs.action.kind
    if kind == "other" and re.sub(r"[^a-z]", "", obs.action.tool.lower()) in SEARCH_TOOLS:
        return "list"
    return kind


def label(name: str, arguments: str, obs: Observation) -> str:
    """The call in one short line: the command it ran, or its sub-command and target."""
    a = obs.action
    if a.command and a.kind != "other":
        shown = a.command
    elif a.target and a.kind != "other":
        sub = load_arguments(arguments).get("command")
        shown = f"{sub} {a.target}" if isinstance(sub, str) and len(sub) <= 20 else a.target
    else:
        shown = " ".join(arguments.split())
    if len(shown) > 120:  # redacted before the cut, which could leave a secret unrecognisable
        shown = redact_text(shown)
    return f"{name} {shown if len(shown) <= 120 else shown[:119] + '…'}".strip()


def make_step(obs: Observation, name: str, arguments: str, text: str) -> Step:
    kind, result = step_kind(obs), outcome(obs, text)
    return Step(
        obs,
        call_key(name, arguments),
        kind,
        label(name, arguments, obs),
        result,
        text,
        bool(_POLLING.search(obs.action.command[:2000])),
        arguments,
        kind == "write" and result.failed and any(_EDIT_MISS.search(ln) for ln in _lines(text)),
    )


def repeated_failure(steps: Sequence[Step], t: int) -> Loop | None:
    tail = steps[t]
    if not tail.outcome.failed or tail.polling or tail.text.startswith(PLACEHOLDER_PREFIX):
        return None
    chain = [tail]
    for s in reversed(steps[:t]):
        if s.key == tail.key:
            if not (s.outcome.failed and s.outcome.signature == tail.outcome.signature):
                break
            chain.append(s)
        elif s.kind in CHANGES and not s.outcome.failed:
            break  # a change that took: trying again after it is work, not a loop
    return Loop("repeated_failure", len(chain), tuple(reversed(chain)))


def edit_misses(steps: Sequence[Step], t: int) -> Loop | None:
    """Edits of one file by one tool, each answered that the text to replace is not there, with
    no successful edit of it, nor any successful write or run, in between: the old text may be
    worded differently each time (another guess at what the file holds). The edit's other
    failures between (the text found twice, an argument missing) neither count nor end it."""
    tail = steps[t]
    target = tail.obs.action.target
    if not tail.miss or not target or tail.text.startswith(PLACEHOLDER_PREFIX):
        return None
    chain = [tail]
    for s in reversed(steps[:t]):
        a = s.obs.action
        if s.miss and a.target == target and a.tool == tail.obs.action.tool:
            chain.append(s)
        elif s.kind in CHANGES and not s.outcome.failed:
            break
    return Loop("repeated_failure", len(chain), tuple(reversed(chain)), edits=True)


def _between_unchanged(s: Step, tail: Step) -> bool:
    """Whether ``s`` leaves the answer of ``tail`` (a read or listing) as it was."""
    if s.kind in ("read", "list", "plan"):
        return True
    if s.kind == "write" and s.outcome.failed:
        return True  # a failed edit changed nothing
    if s.kind == "write" and tail.kind == "read":
        target = tail.obs.action.target
        return target not in s.obs.action.writes and target != s.obs.action.target
    return False


def no_progress(steps: Sequence[Step], t: int) -> Loop | None:
    tail = steps[t]
    if tail.kind not in ("read", "list") or tail.outcome.failed or tail.polling:
        return None
    chain = [tail]
    for s in reversed(steps[:t]):
        if s.key == tail.key:
            if s.outcome.failed or s.text != tail.text:
                break
            chain.append(s)
        elif not _between_unchanged(s, tail):
            break
    return Loop("no_progress", len(chain), tuple(reversed(chain)))


def oscillation(steps: Sequence[Step], t: int, min_cycles: int) -> Loop | None:
    seq = steps[: t + 1]
    n = len(seq)
    for p in (2, 3, 4):
        j = n - p - 1
        while j >= 0 and seq[j].key == seq[j + p].key:
            j -= 1
        cycles = (n - 1 - j) // p
        if cycles < min_cycles:
            continue
        cycle = tuple(seq[n - p :])
        if len({s.key for s in cycle}) != p or any(s.kind not in CHANGES for s in cycle):
            continue
        runs = [seq[n - (c + 1) * p : n - c * p] for c in range(cycles)]
        if not all(any(s.outcome.failed for s in run) for run in runs):
            continue
        if any(run[k].outcome[:2] != cycle[k].outcome[:2] for run in runs for k in range(p)):
            continue  # a failure that changes from cycle to cycle: something is moving
        return Loop("oscillation", cycles, tuple(seq[n - cycles * p :]), cycle)
    return None


def detect(steps: Sequence[Step], t: int, min_count: int, min_cycles: int) -> Loop | None:
    """The loop ending at ``steps[t]``, if any: oscillation first (it explains the repeats it
    holds), then a repeated failure (the same call, then edits of one file missing their text),
    then a no-progress repeat."""
    found = oscillation(steps, t, min_cycles)
    if found is not None:
        return found
    for check in (repeated_failure, edit_misses, no_progress):
        found = check(steps, t)
        if found is not None and found.count >= min_count:
            return found
    return None
