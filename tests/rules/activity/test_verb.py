"""The program a simple command runs (``shell_writes.verb``): the first word that is neither a
``VAR=value`` assignment nor a wrapper (``sudo``, ``env`` …), as the whole list filtered of
assignments and then stripped of its leading wrappers gives it."""

from __future__ import annotations

import random
import re

import pytest

from rules.activity.shell_writes import verb as _verb

WORDS = ["sudo", "env", "exec", "command", "A=1", "_x=", "9x=1", "-e", "=", "x=y=z", "é=1",
         "/usr/bin/python", "pytest", "make", "X", "a/b/", "", "ENV=a b", "sudo2"]  # fmt: skip


def _filtered_then_stripped(argv: tuple[str, ...]) -> str:
    words = [w for w in argv if not re.match(r"^[A-Za-z_]\w*=", w)] if argv else []
    while words and words[0] in ("sudo", "command", "exec", "env"):
        words = words[1:]
    return words[0].rsplit("/", 1)[-1] if words else ""


@pytest.mark.parametrize("seed", range(3))
def test_the_verb_is_the_filtered_words_first_after_the_wrappers(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(3000):
        argv = tuple(rng.choice(WORDS) for _ in range(rng.randint(0, 6)))
        assert _verb(argv) == _filtered_then_stripped(argv), argv
