"""The pattern prefilter (rules/entities/ref_prefilter.py) skips a pattern only when it could not
have matched: every question of the scenario sets, padded past the length where the prefilter
starts, yields the same mentions with and without it; and the slots and literals it derives are
those the template cannot match without."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rules.entities import ref_detect
from rules.entities.ref_lexicon import load_lexicons
from rules.entities.ref_prefilter import SlotPresence, cores, required_literals, required_slots
from tests.support.scenarios import load

HERE = Path(__file__).resolve().parent / "scenarios"
QUESTIONS = sorted({sc.ask for path in sorted(HERE.glob("*.yaml")) for sc in load(path) if sc.ask})
FILLER = "Some context about the project, pasted before the question. " * 6


def _detect(text: str) -> list[ref_detect.Mention]:
    kinds, lexicons = load_lexicons(())
    return ref_detect.detect(text, kinds, lexicons, ("en", "zh", "ko", "ja"))


def test_the_prefilter_changes_no_mention(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(QUESTIONS) > 300
    texts = [FILLER + q for q in QUESTIONS] + [q + "\n" + FILLER for q in QUESTIONS]
    assert all(len(t) >= ref_detect.PREFILTER_MIN_CHARS for t in texts)
    filtered = [_detect(t) for t in texts]
    monkeypatch.setattr(ref_detect, "PREFILTER_MIN_CHARS", 10**9)
    assert filtered == [_detect(t) for t in texts]
    assert sum(bool(f) for f in filtered) > len(QUESTIONS)  # the questions were found


def test_required_slots_skip_optional_and_alternative_groups() -> None:
    regex = re.compile(
        r"(?P<det>the)\s(?:(?P<rec>just)\s)?(?:(?P<verb>made)|(?P<type>x))(?P<type__2>y)"
    )
    assert required_slots(regex, ("det", "rec", "verb", "type")) == ("det", "type")
    assert required_literals(re.compile(r"(?:a|b)'s\s+new(?:er)?")) == ("'s", "new")


def test_presence_is_a_substring_test_of_each_slot_word() -> None:
    assert cores(["create", "created", "set up", "a bit ago"]) == ("bit", "set", "create")
    seen = SlotPresence("the branch i recreated", {"verb": ("create",), "rec": ("just",)})
    assert seen.possible(("verb",)) and not seen.possible(("verb", "rec"))
    assert not seen.possible((), ("'s",))
    assert seen.possible(("det",))  # a slot without a test is taken as present


def test_most_patterns_are_skipped_on_a_long_text_without_their_words() -> None:
    _, lexicons = load_lexicons(())
    english = next(x for x in lexicons if x.lang == "en")
    text = ref_detect.fold("Please refactor the parser so that it handles tabs. " * 20)
    seen = SlotPresence(text, english.finders)
    run = [p for p in english.patterns if seen.possible(p.requires, p.literals)]
    assert len(run) < len(english.patterns) * 2 / 3
