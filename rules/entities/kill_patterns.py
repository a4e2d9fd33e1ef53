"""A `pkill -f` pattern read as what it matches on a command line, when it is plain enough to be
sure of (``track_made``: which remembered process a kill ended)."""

from __future__ import annotations

import re

from rules.activity.entity_pack import MAX_BY_CHARS

_GLOB = re.compile(r"\.\*|[.^$]|[^.^$]+")
_SPECIAL = frozenset("[](){}|+?*\\")


def pattern_regex(pattern: str) -> re.Pattern[str] | None:
    """A `pkill` pattern as a regex, when it holds only literal text, `.`, `.*` (three at most)
    and anchors: what most are (`http.server`, `^node`, `python.*serve`); None otherwise."""
    if (
        not pattern
        or len(pattern) > MAX_BY_CHARS
        or any(c in _SPECIAL for c in pattern.replace(".*", ""))
    ):
        return None
    if pattern.count(".*") > 3:
        return None
    parts = []
    for i, m in enumerate(_GLOB.finditer(pattern)):
        tok = m.group(0)
        if (tok == "^" and i > 0) or (tok == "$" and m.end() < len(pattern)):
            return None
        parts.append(tok if tok in (".*", ".", "^", "$") else re.escape(tok))
    return re.compile("".join(parts))
