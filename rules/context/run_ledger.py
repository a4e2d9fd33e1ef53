"""The working set's failing runs: each run's diagnostics kept under what it ran
(``rules/activity/run_key.py``), so a rerun of the same tests or script replaces them, a passing
wider run closes those it covers, and an install closes the "No module named" failures of what it
installed (``installs``); a later passing run of code closes a run that could not start and
the failures whose place was edited since (``settled_runs``). The newest ``max_runs`` runs are
kept."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.activity import diagnostics
from rules.activity.observations import Observation
from rules.activity.run_key import (
    call_run_key,
    covers,
    raw_command,
    run_argv,
    run_key,
    same_run,
    where_of,
)
from rules.activity.storable import stored_id
from rules.context.installs import installed, without_installed
from rules.context.one_off_runs import one_off, runs_code, runs_own_code
from rules.context.settled_runs import could_not_start, ran_again, settle
from rules.redact import redact_text


def record_run(
    ledger: dict[str, Any],
    obs: Observation,
    result_text: str,
    args: Mapping[str, Any] | None,
    ran: bool,
    max_runs: int,
) -> None:
    """Note a run's outcome in ``ledger["runs"]``; ``args``: its call's parsed arguments;
    ``ran``: it succeeded by its exit code and result."""
    action = obs.action
    outcome = diagnostics.parse(result_text, obs.exit_code)
    # keyed as redacted: the key drops flags (``--password``), and a value left alone past its
    # flag's name is no longer recognised as a secret
    key = call_run_key(args, redact_text) if args is not None else None
    command = redact_text(key or run_key(redact_text(action.target)))
    passed = outcome.verdict == "pass"
    runs = {
        k: v
        for k, v in ledger.get("runs", {}).items()
        if not same_run(k, command) and not (passed and covers(command, k))
    }
    if ran and outcome.verdict != "fail" and (names := installed(action.command)):
        runs = without_installed(runs, names)
    words = run_argv((raw_command(args) if args is not None else None) or action.command)
    if runs_code(words):  # code ran again: the one-offs before it are behind it
        runs = {k: v for k, v in runs.items() if not v.get("once")}
    if passed and runs_own_code(words):  # what could not start, or was edited since, is behind
        runs = ran_again(settle(runs, ledger.get("changed") or []), command)
    if outcome.verdict == "fail" and outcome.diagnostics:
        runs[command] = {
            "seq": ledger["seq"],
            "call_id": stored_id(obs.call_id),
            "diagnostics": [_redacted(d) for d in outcome.diagnostics],
        }
        if one_off(words, where_of(command), ledger):
            runs[command]["once"] = True
        elif could_not_start(outcome.diagnostics):
            runs[command]["unstarted"] = True
    # Keep the newest commands only (insertion order is recency order).
    ledger["runs"] = dict(list(runs.items())[-max_runs:])


def _redacted(diagnostic: dict[str, Any]) -> dict[str, Any]:
    """A diagnostic with its texts redacted (test output prints passwords, connection URLs)."""
    return {k: redact_text(v) if isinstance(v, str) else v for k, v in diagnostic.items()}
