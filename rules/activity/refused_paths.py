"""The paths a command line's own tools said they could not touch: ``mkdir: cannot create
directory ‘a’: File exists``, ``rm: cannot remove 'x': …``, ``cp: cannot stat 'src'``,
``rmdir: failed to remove 'd'``. A chain whose last command succeeded (``mkdir a; echo ok``:
exit code 0) still did not make ``a``: its effect on that path is not noted."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from rules.activity.shell_parse import Effect

# GNU and BSD coreutils' messages: the tool, a refusal, the operand as written in quotes (UTF-8
# locales quote with ‘’, C with ''). Bounded at every step, anchored at a line's start: linear.
_REFUSED = re.compile(
    r"^[\w.-]{1,24}: (?:cannot|failed to)(?: [a-z]{1,12}){1,4} [‘'\"`]([^’'\"`\n]{1,4096})[’'\"`]",
    re.MULTILINE,
)


def refused_names(result: str) -> frozenset[str]:
    """The operands (as written) that a tool in ``result`` refused, normalised."""
    if "cannot " not in result and "failed to " not in result:
        return frozenset()
    return frozenset(_normal(m) for m in _REFUSED.findall(result))


def without_refused(effects: Iterable[Effect], names: frozenset[str]) -> tuple[Effect, ...]:
    """``effects`` less those on a path (or from a source) a tool refused."""
    return tuple(e for e in effects if not _refused(e, names))


def _refused(effect: Effect, names: frozenset[str]) -> bool:
    return _named(effect.path, names) or bool(effect.source and _named(effect.source, names))


def _normal(name: str) -> str:
    return posixpath.normpath(name) if name.strip("/") else name


def _named(path: str, names: frozenset[str]) -> bool:
    """``path`` (resolved) is one of ``names`` (as written: relative ones end it)."""
    if not names:
        return False
    path = _normal(path)
    if path in names:
        return True
    parts = path.split("/")
    return any("/".join(parts[i:]) in names for i in range(1, len(parts)))
