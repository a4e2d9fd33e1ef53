"""The pattern prefilter (rules/entities/ref_prefilter.py) skips a pattern only when it could not
have matched: every question of the scenario sets, as it is and padded past the length where the
phrase gates start, yields the same mentions with and without it; and the literals it derives are
those a template cannot match without."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from rules.entities import ref_detect, ref_scan
from rules.entities.ref_lexicon import _matches_ascii, load_lexicons
from rules.entities.ref_prefilter import possible, required_literals, tail_words
from rules.messages import text_of
from tests.support.scenarios import load
from tests.support.traces import iter_conversations

HERE = Path(__file__).resolve().parent / "scenarios"
QUESTIONS = sorted({sc.ask for path in sorted(HERE.glob("*.yaml")) for sc in load(path) if sc.ask})
LANGS = ("en", "zh", "ko", "ja")
FILLER = "Some context about the project, pasted before the question. " * 6


def _detect(text: str) -> list[ref_detect.Mention]:
    kinds, lexicons = load_lexicons(())
    return ref_detect.detect(text, kinds, lexicons, ("en", "zh", "ko", "ja"))


def _unfiltered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pattern run over the whole text: no literal test, no phrase gate."""
    monkeypatch.setattr(ref_detect, "PREFILTER_MIN_CHARS", 10**9)
    monkeypatch.setattr(ref_detect, "possible", lambda text, literals: True)
    monkeypatch.setattr(ref_scan, "possible", lambda text, literals: True)


def test_the_prefilter_changes_no_mention(monkeypatch: pytest.MonkeyPatch) -> None:
    """Literal tests (at every length) and phrase gates (long texts) against neither."""
    assert len(QUESTIONS) > 300
    texts = [*QUESTIONS, *(FILLER + q for q in QUESTIONS), *(q + "\n" + FILLER for q in QUESTIONS)]
    assert sum(len(t) < ref_detect.PREFILTER_MIN_CHARS for t in texts) >= len(QUESTIONS)
    filtered = [_detect(t) for t in texts]
    _unfiltered(monkeypatch)
    assert filtered == [_detect(t) for t in texts]
    assert sum(bool(f) for f in filtered) > len(QUESTIONS)  # the questions were found


@pytest.mark.needs_shared
def test_the_prefilter_changes_no_mention_on_the_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, None] = {}
    for conv in iter_conversations():
        for m in conv["messages"]:
            text = text_of(m.get("content")) if m.get("role") == "user" else ""
            if 0 < len(text) <= 8_000:
                seen.setdefault(text, None)
    texts = list(seen)
    assert sum(len(t) < ref_detect.PREFILTER_MIN_CHARS for t in texts) > 500
    filtered = [_detect(t) for t in texts]
    _unfiltered(monkeypatch)
    assert filtered == [_detect(t) for t in texts]
    assert sum(bool(f) for f in filtered) > 50


def test_required_literals_skip_optional_and_alternative_parts() -> None:
    assert required_literals(re.compile(r"(?:a|b)'s\s+new(?:er)?(?:old)?")) == ("'s", "new")
    assert required_literals(re.compile(r"(?:xmount|ymounts)(?:abc)+")) == ("abc",)
    assert required_literals(re.compile(r"(?>what)\s+(?:ever)?")) == ("what",)


def test_a_pattern_needing_a_missing_literal_is_skipped() -> None:
    _, lexicons = load_lexicons(())
    english = next(x for x in lexicons if x.lang == "en")
    possessive = next(p for p in english.patterns if p.kind == "possessive")
    assert "'s" in possessive.literals
    text = ref_detect.fold("Please refactor the parser so that it handles tabs. " * 20)
    assert not possible(text, possessive.literals)
    assert possible(text + " the lead agent's config", possessive.literals)


def test_a_script_no_ascii_character_is_in_is_not_searched_in_ascii_text() -> None:
    _, lexicons = load_lexicons(())
    assert {x.lang: x.script_in_ascii for x in lexicons} == {
        "en": True,
        "zh": False,
        "ko": False,
        "ja": False,
        "es": True,  # their scripts are words: these languages are mostly ASCII
        "fr": True,
        "de": True,
        "pt": True,
        "ru": False,  # Cyrillic letters
        "it": True,
        "tr": False,  # the letters ğ, ı, ş
        "hi": False,  # Devanagari letters
    }
    assert _matches_ascii(re.compile("[a-z]")) and _matches_ascii(re.compile("[\u3040-\u30ff_]"))
    assert not _matches_ascii(re.compile("[\u3040-\u30ff]"))
    assert _matches_ascii(re.compile("x?[\u3040-\u30ff]"))  # not one class: searched
    ascii_only = ref_detect.prepare("delete the folder you just made", lexicons, LANGS)
    assert [x.lang for x in ascii_only.lexicons] == ["en"]
    mixed = ref_detect.prepare("删除你刚创建的文件夹 please", lexicons, LANGS)
    assert [x.lang for x in mixed.lexicons] == ["en", "zh", "ja"]
    assert [m.lang for m in _detect("删除你刚创建的文件夹 please")] == ["zh"]


def test_a_relations_words_are_tested_by_their_tail_first() -> None:
    """The relation words before a mention ("the commit on [the branch you made]") are searched
    only when the text before it ends with their last word: the same mentions as searching
    always, over every question of the scenario sets."""
    kinds, lexicons = load_lexicons(())
    english = next(x for x in lexicons if x.lang == "en")
    assert english.relation_prefix is not None
    assert english.relation_prefix.tail == ("in", "inside", "under", "within")
    assert dict(english.relation_prefixes)["next_to"].tail == ("alongside", "beside", "to")
    assert tail_words(re.compile(r"a\s++(?:b|c)?\s++$")) == ()  # an optional end: no tail
    # a pack's own shapes the folded, right-stripped text could not end with as written
    assert tail_words(re.compile(r"the\s++commit\s++on $")) == ("on",)
    assert tail_words(re.compile(r"(?i)the\s++commit\s++ON\s++$")) == ()
    assert tail_words(re.compile(r"the\s++commit\s++(?i:ON)\s++$")) == ()
    assert tail_words(re.compile(r"the\s++commit(?: |x)$")) == ()  # one branch is all blank

    def untailed(lex: ref_detect.Lexicon) -> ref_detect.Lexicon:
        prefix = lex.relation_prefix
        return dataclasses.replace(
            lex,
            relation_prefix=prefix and dataclasses.replace(prefix, tail=()),
            relation_prefixes=tuple(
                (edge, dataclasses.replace(p, tail=())) for edge, p in lex.relation_prefixes
            ),
        )

    always = tuple(untailed(x) for x in lexicons)
    found = [ref_detect.detect(q, kinds, lexicons, LANGS) for q in QUESTIONS]
    assert found == [ref_detect.detect(q, kinds, always, LANGS) for q in QUESTIONS]
    assert sum(m.kind == "relation" and m.lang == "en" for f in found for m in f) >= 10
