"""Whole-word search of a name (a detail beside the noun, a name the user ruled out) without a
pattern compiled for it, in time linear in the text."""

from __future__ import annotations

import time

import pytest

from rules.entities.ruled_out import _negated
from rules.entities.whole_words import holds_word


@pytest.mark.parametrize(
    ("text", "name", "held"),
    [
        ("q1.md", "q1", True),
        ("profile", "pr", False),
        ("redis:7", "redis", True),
        ("myredis", "redis", False),
        ("redis2", "redis", False),
        ("a-redis", "redis", True),  # a hyphen is no letter or digit
        ("", "redis", False),
    ],
)
def test_a_whole_word_of_letters_and_digits(text: str, name: str, held: bool) -> None:
    assert holds_word(text, name) is held


@pytest.mark.parametrize(
    ("text", "name", "negated"),
    [
        ("stop the container, not the redis one", "redis", True),
        ("not redis", "redis", True),
        ("nicht den cache-ordner", "cache-ordner", True),
        ("不是 redis 那个", "redis", True),
        ("redisじゃなくて", "redis", True),
        ("redis 말고 다른 거", "redis", True),
        ("stop redis, not postgres", "redis", False),
        ("not the redis-cache one", "redis", False),  # another name that starts as it does
        ("cannot redis", "redis", False),  # "not" inside a word
    ],
)
def test_a_name_the_user_ruled_out(text: str, name: str, negated: bool) -> None:
    assert _negated(name, text) is negated


def test_dense_repeats_are_searched_in_linear_time() -> None:
    for text, name in (("a" * 200_000, "aa"), ("not " * 50_000, "not"), ("不是" * 50_000, "是")):
        started = time.process_time()
        holds_word(text, name)
        _negated(name, text)
        assert time.process_time() - started < 1.0, name
