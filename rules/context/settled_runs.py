"""Failing runs settled by what the agent did after them (``run_ledger``).

A run that could not start (a project's test runner whose settings are not configured, whose
settings module or test label does not import: ``ImproperlyConfigured``, ``ModuleNotFoundError``,
unittest's ``_FailedTest``) ran none of the code it was asked to: its place
(``django/conf/__init__.py``) is no repair target. The agent then works around it (another
runner, its own script); a later run of code that passes closes it, unless its place is a file
the agent changed (then its edit is the suspect). A failure whose place the agent edited after it
shows what the old code did: a later run of code that passes closes it. A narrower run of the
same tests that passes closes, in a wider run, the failures of what it ran (``ran_again``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rules.activity.run_key import scope
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


def ran_again(runs: Mapping[str, Any], passed: str) -> dict[str, Any]:
    """``runs`` without the failures a passing run ``passed`` (a key) ran again: of a run of the
    same program in the same place, those placed in a file or folder it ran whole (``pytest
    tests/test_a.py``), or the tests it named (``pytest tests/test_a.py::test_x``: its FAILED
    line; a line in the file may be another test's). A selection (``-k``) says too little."""
    where, program, paths, chose = scope(passed)
    if not paths or chose:
        return dict(runs)
    out: dict[str, Any] = {}
    for key, run in runs.items():
        there, other, _, _ = scope(key)
        if other != program or (where and there != where):
            out[key] = run
            continue
        diags = run.get("diagnostics") or []
        ran = [_relative(p, where[3:] or there[3:]) for p in paths]
        kept = [d for d in diags if not any(_ran(d, p) for p in ran)]
        if kept:
            out[key] = run if len(kept) == len(diags) else {**run, "diagnostics": kept}
    return out


def _relative(path: str, where: str) -> str:
    """``path`` as the tests' own output names it: relative to the folder the run was in
    (``pytest /testbed/tests/a.py`` after ``cd /testbed``: ``tests/a.py``)."""
    root = where.rstrip("/") + "/"
    return path[len(root) :] if where.startswith("/") and path.startswith(root) else path


def _ran(diagnostic: Mapping[str, Any], path: str) -> bool:
    """Whether a run of ``path`` ran what the diagnostic is about."""
    file = diagnostic.get("file")
    if not isinstance(file, str) or not file:
        return False
    file, path = file.removeprefix("./"), path.removeprefix("./").rstrip("/")
    if "::" not in path:
        return file == path or file.startswith(path + "/")
    if diagnostic.get("line"):
        return False  # a place in the file: which test's, the run does not say
    test = str(diagnostic.get("message") or "").split(" ", 1)[0]
    named = f"{file}::{test}"
    return named == path or named.startswith(path + "::")
