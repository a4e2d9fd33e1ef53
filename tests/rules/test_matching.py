"""rules.matching: normalisation, exact match, unique containment, ambiguity, misses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.chain.repairs import MATCH_COMPARISONS, repair_messages
from rules.chain.validator import find_violations
from rules.matching import Budget, Matcher, equivalent, match, normalize


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


def test_normalize_drops_every_character_python_calls_whitespace_and_no_other() -> None:
    import sys
    import unicodedata

    for code in range(sys.maxunicode + 1):
        raw = f"a{chr(code)} b"
        folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", raw).casefold())
        assert normalize(raw) == "".join(c for c in folded if not c.isspace()), hex(code)


@pytest.mark.parametrize(
    ("needle", "candidates", "value", "how"),
    [
        ("Phase 5:", ["Phase 4：", "Phase 5：", "Phase 6："], "Phase 5：", "exact"),
        ("CALL_abc", ["call_abc", "call_def"], "call_abc", "exact"),
        (" call_abc ", ["call_abc"], "call_abc", "exact"),
        ("ｔｏｏｌｕ_01", ["toolu_01", "toolu_02"], "toolu_01", "exact"),
        # unique containment, either direction, shorter side >= 6 characters
        (
            "write tests",
            ["Write tests for the parser", "Fix the build"],
            "Write tests for the parser",
            "containment",
        ),
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
        (
            "parser",
            ["fix the parser", "test the parser"],
            True,
            ("fix the parser", "test the parser"),
        ),
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


ids = st.text(alphabet="abcABC_-12 ＡＢ１", max_size=12)


@given(needle=ids, candidates=st.lists(ids, max_size=8))
def test_matcher_answers_as_match_does(needle: str, candidates: list[str]) -> None:
    assert Matcher(candidates).match(needle) == match(needle, candidates)


def test_a_spent_budget_leaves_exact_matches_only() -> None:
    budget = Budget(4)
    m = Matcher(["call_alpha_1", "call_beta_2"], budget)
    assert m.match("CALL_ALPHA_1").how == "exact"  # no comparisons needed
    assert m.match("alpha_1").how == "containment"  # spends 2
    assert m.match("beta_2").how == "containment"  # spends 2: the budget is gone
    assert not m.match("alpha_1").matched  # containment refused now
    assert m.match("call_beta_2").how == "exact"  # exact still answered


def test_thousands_of_unmatched_results_in_one_turn_stay_within_the_budget() -> None:
    n = 2000
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        for i in range(n)
    ]
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": calls},
    ]
    messages += [{"role": "tool", "tool_call_id": f"zz_{i}", "content": str(i)} for i in range(n)]
    spent: list[int] = []
    original = Budget.take

    def counting(self: Budget, k: int) -> bool:
        granted = original(self, k)
        spent.append(k if granted else 0)
        return granted

    Budget.take = counting  # type: ignore[method-assign]
    try:
        out, reps = repair_messages(messages)
    finally:
        Budget.take = original  # type: ignore[method-assign]
    assert not find_violations(out)
    assert sum(r["kind"] == "orphan_result" for r in reps) == n
    # comparisons were spent up to the budget, then refused (exact matching only from there)
    assert 0 < sum(spent) <= MATCH_COMPARISONS
    assert spent[-1] == 0
