"""rules.matching: normalisation, exact match, unique containment, ambiguity, misses."""

from __future__ import annotations

import pytest

from rules.matching import equivalent, match, normalize


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Phase 5：", "phase5:"),  # fullwidth colon
        ("Phase 5:", "phase5:"),
        ("ＣＡＬＬ＿１２", "call_12"),  # fullwidth letters, underscore and digits
        ("  call_1\t\n", "call_1"),
        ("call\u3000one", "callone"),  # ideographic space
        ("Straße", "strasse"),  # case folding, not just lower()
        ("", ""),
    ],
)
def test_normalize(raw: str, expected: str) -> None:
    assert normalize(raw) == expected
    assert normalize(normalize(raw)) == normalize(raw)


@pytest.mark.parametrize(
    ("needle", "candidates", "value", "how"),
    [
        ("Phase 5:", ["Phase 4：", "Phase 5：", "Phase 6："], "Phase 5：", "exact"),
        ("CALL_abc", ["call_abc", "call_def"], "call_abc", "exact"),
        (" call_abc ", ["call_abc"], "call_abc", "exact"),
        ("ｔｏｏｌｕ_01", ["toolu_01", "toolu_02"], "toolu_01", "exact"),
        # unique containment, either direction, shorter side >= 6 characters
        ("write tests", ["Write tests for the parser", "Fix the build"],
         "Write tests for the parser", "containment"),
        ("call_abcdef_retry", ["call_abcdef", "call_xyz"], "call_abcdef", "containment"),
    ],
)
def test_match_hits(needle: str, candidates: list[str], value: str, how: str) -> None:
    result = match(needle, candidates)
    assert result.value == value
    assert result.how == how
    assert result.matched
    assert not result.ambiguous


@pytest.mark.parametrize(
    ("needle", "candidates", "ambiguous", "reported"),
    [
        # two candidates normalise to the same text: never guess
        ("call_a", ["CALL_A", "call_a "], True, ("CALL_A", "call_a ")),
        # contained in two candidates: ambiguous
        ("tests", ["write tests", "run tests"], False, ("write tests", "run tests")),
        ("parser", ["fix the parser", "test the parser"], True,
         ("fix the parser", "test the parser")),
        # shorter side below 6 characters: containment not tried
        ("call", ["call_1"], False, ("call_1",)),
        ("x", [], False, ()),
        ("", ["a"], False, ("a",)),
    ],
)
def test_match_misses_list_candidates(
    needle: str, candidates: list[str], ambiguous: bool, reported: tuple[str, ...]
) -> None:
    result = match(needle, candidates)
    assert result.value is None
    assert result.how is None
    assert result.ambiguous is ambiguous
    assert result.candidates == reported


def test_duplicate_candidates_count_once() -> None:
    assert match("call_1", ["call_1", "call_1"]).value == "call_1"


def test_min_containment_is_configurable() -> None:
    assert match("abc", ["xxabcxx"]).value is None
    assert match("abc", ["xxabcxx"], min_containment=3).value == "xxabcxx"


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [("Phase 5:", "phase 5：", True), ("a", "b", False), ("", " ", False)],
)
def test_equivalent(a: str, b: str, same: bool) -> None:
    assert equivalent(a, b) is same
