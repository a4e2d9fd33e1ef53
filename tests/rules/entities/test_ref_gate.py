"""The phrase gate (rules/entities/ref_gate.py): a pattern beginning with its language's phrase is
tried, in a long text, only where the phrase matches. It must find exactly what scanning finds:
every position where a gated pattern matches is one where the phrase does (each scenario
question, and the trace corpus's user messages), and detection with the gate equals detection
without it, mention for mention."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from rules.entities import ref_detect
from rules.entities.ref_gate import begins_with, items, relaxed
from rules.entities.ref_lexicon import load_lexicons
from rules.entities.ref_scan import matches, matches_at, starts
from rules.messages import text_of
from tests.support.scenarios import load
from tests.support.traces import iter_conversations

HERE = Path(__file__).resolve().parent / "scenarios"
QUESTIONS = sorted({sc.ask for path in sorted(HERE.glob("*.yaml")) for sc in load(path) if sc.ask})
LANGS = ("en", "zh", "ko", "ja")
FILLER = "Some context about the project, pasted before the question. " * 6


def _english() -> ref_detect.Lexicon:
    return next(x for x in load_lexicons(())[1] if x.lang == "en")


def _detect(text: str) -> list[ref_detect.Mention]:
    kinds, lexicons = load_lexicons(())
    return ref_detect.detect(text, kinds, lexicons, LANGS)


def _ungated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ref_detect, "matches_at", lambda p, text, where: matches(p, text))


def test_items_are_the_top_level_pieces_with_their_quantifiers() -> None:
    source = r"{det}\s++(?!one\b)(?:x(?P<m>[a-z)]{0,30}+)\s++)?{type}\b[.,]?\d{2,5}+"
    assert items(source) == [
        "{det}",
        r"\s++",
        r"(?!one\b)",
        r"(?:x(?P<m>[a-z)]{0,30}+)\s++)?",
        "{type}",
        r"\b",
        "[.,]?",
        r"\d{2,5}+",
    ]
    assert items(r"{det}\s++|{type}") is None  # an alternation: no leading items
    assert items(r"{det}(?:\s++") is None


def test_relaxed_drops_lookarounds_and_widens_slots() -> None:
    wider = {"type": "types", "dem": "det"}
    got = relaxed(["{dem}", r"\s++", r"(?!one\b)", "(?=x)?", "{type}", "{verb}"], wider)
    assert got == ["{det}", r"\s++", "(?=x)?", "{types}", "{verb}"]  # a quantified one is kept
    assert begins_with(got, ["{det}", r"\s++"])
    assert not begins_with(got, ["{det}", r"\s*+"])
    assert not begins_with(["{det}"], ["{det}", r"\s++"])


def test_the_english_patterns_beginning_with_a_determiner_and_a_noun_are_gated() -> None:
    gated = [p.kind for p in _english().patterns if p.gate is not None]
    assert gated == [
        "relation", "described", "described", "described", "recent", "before", "demonstrative"
    ]  # fmt: skip
    # the verb before the noun, a recency adjective, an object verb, "the other", "the one
    # before that" (no noun): not the phrase
    assert sum(p.gate is None for p in _english().patterns) == 13
    # one gate, the phrase's: a determiner, then a noun of the pack ("the table", not "the")
    (gate,) = {p.gate for p in _english().patterns if p.gate is not None}
    assert gate.match("the table") and gate.match("that config file")
    assert not gate.match("the") and not gate.match("the weather")


def _every_match_starts_where_the_phrase_does(texts: list[str]) -> int:
    tried = 0
    for text in texts:
        folded = ref_detect.fold(text)
        for p in _english().patterns:
            if p.gate is None:
                continue
            allowed = set(starts(p.gate, folded))
            for at in range(len(folded)):
                if at not in allowed:
                    assert p.regex.match(folded, at) is None, (p.kind, text, at)
            tried += sum(p.regex.match(folded, at) is not None for at in allowed)
    return tried


def test_every_match_of_a_gated_pattern_starts_where_the_phrase_does() -> None:
    assert len(QUESTIONS) > 300
    assert _every_match_starts_where_the_phrase_does(QUESTIONS) > 100  # the patterns do match


def test_matches_at_the_phrase_equals_scanning() -> None:
    text = ref_detect.fold(
        "xthe file I made, the the file you wrote, that folder the lead agent created; "
        "bathe file. Our config file we had you write, the file from earlier"
    )
    found = 0
    for p in _english().patterns:
        if p.gate is not None:
            want = [m.span() for m in matches(p, text)]
            assert [m.span() for m in matches_at(p, text, starts(p.gate, text))] == want
            found += len(want)
    assert found >= 4


def test_the_gate_changes_no_mention(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [FILLER + q for q in QUESTIONS] + [q + "\n" + FILLER for q in QUESTIONS]
    assert all(len(t) >= ref_detect.PREFILTER_MIN_CHARS for t in texts)
    gated = [_detect(t) for t in texts]
    _ungated(monkeypatch)
    assert gated == [_detect(t) for t in texts]
    assert sum(bool(f) for f in gated) > len(QUESTIONS)


def _corpus_questions() -> list[str]:
    seen: dict[str, None] = {}
    for conv in iter_conversations():
        for m in conv["messages"]:
            if m.get("role") == "user":
                text = text_of(m.get("content"))
                if 0 < len(text) <= 8_000 and re.search(r"[a-zA-Z]", text):
                    seen.setdefault(text, None)
    return list(seen)


@pytest.mark.needs_shared
def test_the_gate_changes_no_mention_on_the_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = _corpus_questions()
    assert len(texts) > 1000
    gated = [_detect(t) for t in texts]
    _ungated(monkeypatch)
    assert gated == [_detect(t) for t in texts]
    assert sum(bool(f) for f in gated) > 50
    long_ones = [t for t in texts if len(t) >= ref_detect.PREFILTER_MIN_CHARS][:100]
    assert _every_match_starts_where_the_phrase_does(long_ones) > 0


def test_items_read_every_quantifier_and_refuse_escapes_of_other_lengths() -> None:
    # "{,1}" is a quantifier to Python: the noun it follows is optional, not a leading item
    assert items(r"{det}\s++{type}{,1}x") == ["{det}", r"\s++", "{type}{,1}", "x"]
    assert items(r"{det}{,}") == ["{det}{,}"]
    for escape in (r"\x41", r"\N{SPACE}", r"\012", r"\1", r"\u0041"):
        assert items(r"{det}\s++" + escape) is None


USER_PACKS = {
    # a phrase narrower than patterns are read with: a lookaround, a slot with a wider one
    "lookaround": (r"{det}\s++(?!one\b)<mod>{types}", None, "Open the one from earlier."),
    "narrow slot": (r"{dem}\s++<mod>{types}", None, "Open the config file you just made."),
    "narrow noun": (r"{det}\s++<mod>{type}", None, "Fix the summaries the migration script made."),
    # a pattern whose noun is optional by a "{,1}" quantifier
    "optional noun": (
        None,
        r"\b{det}\s++<mod>{type}{,1}(?:from|of)\s++{rec}\b",
        "Open the blue from earlier.",
    ),
}


@pytest.mark.parametrize("name", sorted(USER_PACKS))
def test_a_user_packs_phrase_or_pattern_never_gates_what_it_would_miss(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    phrase, pattern, question = USER_PACKS[name]
    en: dict[str, object] = {}
    if phrase:
        en["phrase"] = phrase
    if pattern:
        en["patterns"] = [{"kind": "recent", "re": pattern}]
    pack = tmp_path / "pack.yaml"
    pack.write_text(yaml.safe_dump({"references": {"languages": {"en": en}}}))
    kinds, lexicons = load_lexicons((str(pack),))
    text = FILLER + question  # long: the gate is used
    gated = ref_detect.detect(text, kinds, lexicons, ("en",))
    _ungated(monkeypatch)
    assert gated == ref_detect.detect(text, kinds, lexicons, ("en",))
    assert gated, "the question holds a reference"
