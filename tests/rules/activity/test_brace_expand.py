"""Brace lists in a shell word expand as bash expands them, within a bound."""

from __future__ import annotations

import time

import pytest

from rules.activity.brace_expand import MAX_WORDS, expand
from rules.activity.shell_parse import analyse, load_verbs


@pytest.mark.parametrize(
    ("word", "words"),
    [
        ("project/{src,tests}", ["project/src", "project/tests"]),
        ("file{,.bak}", ["file", "file.bak"]),
        ("day{1..3}.md", ["day1.md", "day2.md", "day3.md"]),
        ("v{3..1}", ["v3", "v2", "v1"]),
        ("{x..z}", ["x", "y", "z"]),
        ("a{b{c,d},e}f", ["abcf", "abdf", "aef"]),
        ("{a,b}{c,d}", ["ac", "ad", "bc", "bd"]),
        ("a{b{c,d}}", ["a{bc}", "a{bd}"]),
        ("{a}", ["{a}"]),
        ("x{y", ["x{y"]),
        ("a}b{", ["a}b{"]),
        ("{1..x}", ["{1..x}"]),
        ("plain.txt", ["plain.txt"]),
    ],
)
def test_words_expand_as_the_shell_expands_them(word: str, words: list[str]) -> None:
    assert expand(word) == words


@pytest.mark.parametrize("word", ["{1..100000000}", "{a,b}" * 40, "{" * 3000 + "a,b" + "}" * 3000])
def test_an_expansion_is_bounded(word: str) -> None:
    out = expand(word)
    assert 1 <= len(out) <= MAX_WORDS


def test_a_long_run_of_braces_takes_linear_time() -> None:
    word = "{a," * 1300 + "b" + "}" * 1300
    assert len(expand(word)) <= MAX_WORDS


def test_mkdir_with_a_brace_list_makes_each_folder() -> None:
    effects = analyse("mkdir -p app/{src,tests/unit}", "/w", load_verbs()).effects
    assert [(e.action, e.type, e.path) for e in effects] == [
        ("create", "folder", "/w/app/src"),
        ("create", "folder", "/w/app/tests/unit"),
    ]


def test_a_backup_copy_with_an_empty_alternative() -> None:
    effects = analyse("cp config.yaml{,.bak}", "/w", load_verbs()).effects
    assert [(e.action, e.path, e.source) for e in effects] == [
        ("copy", "/w/config.yaml.bak", "/w/config.yaml")
    ]


@pytest.mark.parametrize(
    "command",
    [
        # a sed script's braces are quoted: the shell passes it whole (a SWE agent's run)
        "sed -i '/def check/,/^def/ { /^def check/,/^def/ s/^\\(if a:\\)/"
        'print("x:", [s.raw for s in xs])\\n\\1/ }\' src/fix.py',
        'mkdir -p "app/{src,tests}"',
        "mkdir -p 'app/{src,tests}'",
    ],
)
def test_a_word_whose_braces_are_quoted_is_not_expanded(command: str) -> None:
    effects = analyse(command, "/w", load_verbs()).effects
    assert all(",/" not in e.path and "app/src" not in e.path for e in effects), effects
    assert len(effects) <= 1


def test_quoted_and_bare_braces_on_one_line() -> None:
    effects = analyse("mkdir -p 'a/{x,y}' b/{x,y}", "/w", load_verbs()).effects
    assert [e.path for e in effects] == ["/w/a/{x,y}", "/w/b/x", "/w/b/y"]


def test_a_word_of_empty_alternatives_is_read_a_bounded_number_of_times() -> None:
    word = "{,}" * 1365  # 4,095 characters: 256 rescans of it made no word
    started = time.thread_time()
    for _ in range(10):
        expand(word)
    assert time.thread_time() - started < 0.1  # 88 ms a call before
    assert 1 <= len(expand(word)) <= MAX_WORDS
