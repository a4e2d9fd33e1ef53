"""``rules.regex_literals``: a pattern compiled from the parse its literals are read from is the
pattern ``re.compile`` gives (equal: the same source, flags and code), for every template of the
references pack and for patterns whose flags, groups and sets take each of re's paths; and the
literals every match holds."""

from __future__ import annotations

import re

import pytest

from rules.entities.ref_lexicon import load_lexicons
from rules.regex_literals import compile_once, parse_tree, required_literals

SHAPES = [
    (r"(?P<verb>made|created)\s++(?P<type>file|folder)", 0),
    (r"(?i)^error(?:\s*:)?\s+(?P<message>.+)$", re.M),
    (r"[\w.-]+@[a-z]{2,}(?=\s|$)", re.I | re.S),
    (r"(?<![a-z])(?:pr|tag)(?![a-z])\d*", 0),
    (r"(a|b)(?(1)c|d)[^\x00-\x1f]*+", re.X),
    (r"\bcafé\b", re.ASCII),
    (r"刚(?:才|刚)(?:创建|建)的(?P<type>文件夹|表)", 0),
]


@pytest.mark.parametrize(("source", "flags"), SHAPES)
def test_a_pattern_compiled_once_is_the_one_re_compiles(source: str, flags: int) -> None:
    once = compile_once(source, flags)
    assert once == re.compile(source, flags)
    assert once.pattern == source and once.groupindex == re.compile(source, flags).groupindex


def test_every_references_template_compiled_once_is_the_one_re_compiles() -> None:
    _, lexicons = load_lexicons()
    patterns = [p.regex for lex in lexicons for p in lex.patterns]
    assert len(patterns) > 150
    for pattern in patterns:
        assert pattern == re.compile(pattern.pattern, pattern.flags & ~re.UNICODE), pattern.pattern


def test_the_parse_is_shared_whatever_the_flags_say_of_unicode() -> None:
    """A compiled text pattern's flags hold re.UNICODE, those it was compiled with may not: one
    parse serves both (the literals' reader asks with the compiled pattern's flags)."""
    source = r"(?:the|that)\s++new\s++(?P<type>branch|tag)"
    tree = parse_tree(source, 0)
    assert parse_tree(source, re.UNICODE) is tree
    assert required_literals(compile_once(source)) == ("new", "th")


def test_a_bad_pattern_raises_as_re_does() -> None:
    with pytest.raises(re.error):
        compile_once(r"(?P<a>x)(?P<a>y)")
