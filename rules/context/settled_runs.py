"""Failing runs settled by what the agent did after them (``run_ledger``).

A run that could not start (a project's test runner whose settings are not configured, whose
settings module or test label does not import: ``ImproperlyConfigured``, ``ModuleNotFoundError``,
unittest's ``_FailedTest``) ran none of the code it was asked to: its place
(``django/conf/__init__.py``) is no repair target. The agent then works around it (another
runner, its own script); a later run of code that passes closes it, unless its place is a file
the agent changed (then its edit is the suspect). A failure whose place the agent edited after it
shows what the old code did: a later run of code that passes closes it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rules.context.file_names import same_file

# exceptions raised before the code asked for runs: an import or a configuration refused
_UNSTARTED = frozenset(
    {"ModuleNotFoundError", "ImportError", "ImproperlyConfigured", "AppRegistryNotReady"}
)
_LOADER = "unittest.loader._FailedTest"  # a test label unittest could not import
EDITED = "edited"  # a diagnostic's mark: its file was edited after the run


def could_not_start(diagnostics: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a failing run's diagnostics say it could not start: tracebacks and loader
    failures only, one of them an import or a configuration refused (a chained exception, the
    ``RuntimeError`` raised while handling the ``ImportError``, is part of it)."""
    if not diagnostics or not all(
        d.get("tool") == "python" or _LOADER in str(d.get("message") or "") for d in diagnostics
    ):
        return False
    return any(
        str(d.get("code") or "").rsplit(".", 1)[-1] in _UNSTARTED
        or _LOADER in str(d.get("message") or "")
        for d in diagnostics
    )


def _named(file: Any, paths: Iterable[str]) -> bool:
    if not isinstance(file, str) or not file:
        return False
    file = file.removeprefix("./")
    return any(same_file(file, p.removeprefix("./")) for p in paths)


def mark_edited(runs: Mapping[str, Any], paths: Sequence[str]) -> dict[str, Any]:
    """``runs`` with the diagnostics placed in ``paths`` marked edited (copies: the runs may be
    the previous request's state)."""
    out: dict[str, Any] = {}
    for key, run in runs.items():
        diags = run.get("diagnostics") or []
        if any(not d.get(EDITED) and _named(d.get("file"), paths) for d in diags):
            marked = [{**d, EDITED: True} if _named(d.get("file"), paths) else d for d in diags]
            run = {**run, "diagnostics": marked}
        out[key] = run
    return out


def settle(runs: Mapping[str, Any], changed: Sequence[str]) -> dict[str, Any]:
    """``runs`` after a run of code passed: without the runs that could not start (unless one
    of their places is a file in ``changed``) and the diagnostics edited since."""
    out: dict[str, Any] = {}
    for key, run in runs.items():
        diags = run.get("diagnostics") or []
        if run.get("unstarted") and not any(_named(d.get("file"), changed) for d in diags):
            continue
        kept = [d for d in diags if not d.get(EDITED)]
        if kept:
            out[key] = run if len(kept) == len(diags) else {**run, "diagnostics": kept}
    return out
