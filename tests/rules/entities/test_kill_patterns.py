"""`pkill` patterns read as far as they are plain: literal text, `.`, `.*` and anchors; anything
more of regex (classes, groups, alternatives, repeats) matches nothing, so no server is ended by
a guess."""

from __future__ import annotations

import pytest

from rules.entities.kill_patterns import pattern_regex


@pytest.mark.parametrize(
    ("pattern", "command", "found"),
    [
        ("http.server", "python -m http.server 8000", True),
        ("python -m http.server", "python -m http.server 8000", True),
        ("^python", "python -m http.server 8000", True),
        ("^http", "python -m http.server 8000", False),
        ("8000$", "python -m http.server 8000", True),
        ("python.*8000", "python -m http.server 8000", True),
        ("vite", "python -m http.server 8000", False),
    ],
)
def test_plain_patterns_match_as_pkill_would(pattern: str, command: str, found: bool) -> None:
    regex = pattern_regex(pattern)
    assert regex is not None
    assert (regex.search(command) is not None) is found


@pytest.mark.parametrize(
    "pattern", ["", "http\\.server", "(a|b)", "[hH]ttp", "serv+", "a?b", "x^y", "a$b", "a.*" * 4]
)
def test_other_patterns_match_nothing(pattern: str) -> None:
    assert pattern_regex(pattern) is None
