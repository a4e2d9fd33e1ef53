"""The diagnostics parser's literal prefilter (``live_toolchains``: a pattern runs only over a text
that holds every literal it needs) gives the outcome of every pattern run on every line: over
random outputs mixed from each toolchain's lines, cut and joined, and over every tool result of
the trace corpus. A wrong shortcut (a literal a pattern does not need) is caught."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import pytest

from rules.activity import diagnostics
from rules.activity.diagnostics import RunOutcome, live_toolchains, scan, toolchains
from rules.messages import text_of

LINES = [
    "FAILED tests/test_a.py::test_x - AssertionError: boom",
    "ERROR tests/test_b.py::test_y",
    "tests/test_a.py:12: AssertionError",
    "===== 2 failed, 3 passed in 0.10s =====",
    "==== 5 passed in 0.20s ====",
    "!!!!! 1 failure !!!!!",
    "FAIL: test_x (tests.test_a.T)",
    "FAILED (failures=1)",
    "OK (skipped=1)",
    "OK",
    "--- FAIL: TestX (0.00s)",
    "    a_test.go:12: want 1 got 2",
    "FAIL",
    "ok  \texample.com/pkg\t0.1s",
    "PASS",
    "./main.go:3:5: undefined: x",
    "error[E0425]: cannot find value `x` in this scope",
    "  --> src/main.rs:3:5",
    "error: could not compile `x`",
    "---- tests::t stdout ----",
    "test result: FAILED. 1 passed; 1 failed",
    "test result: ok. 2 passed",
    "src/a.ts(3,5): error TS2322: Type 'string' is not assignable",
    "src/a.ts:3:5 - error TS2322: Type 'string' is not assignable",
    "Found 2 errors in 1 file.",
    "/src/app.js",
    "  3:5  error  'x' is defined but never used  no-unused-vars",
    "✖ 2 problems (2 errors, 0 warnings)",
    "FAIL src/a.test.js",
    "  ● suite › adds",
    "    at Object.<anonymous> (src/a.test.js:3:5)",
    "Tests:       1 failed, 2 passed, 3 total",
    "Tests:       2 passed, 2 total",
    "a.c:3:5: error: expected ';' before '}' token",
    "Program.cs(3,5): error CS1002: ; expected [/src/p.csproj]",
    "error MSB1009: Project file does not exist.",
    "Build FAILED.",
    "Build succeeded.",
    "Traceback (most recent call last):",
    '  File "app/main.py", line 3, in <module>',
    '  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads',
    "ValueError: bad value",
    "src/app/core.py:12: error: Incompatible types  [assignment]",
    "Found 2 errors in 1 file (checked 5 source files)",
    "Success: no issues found in 5 source files",
    "app/views.py:1:8: F401 [*] `os` imported but unused",
    "F401 [*] `os` imported but unused",
    " --> app/views.py:1:8",
    "Found 2 errors.",
    "All checks passed!",
    " FAIL  src/sum.test.ts > math > adds",
    " ❯ src/sum.test.ts:5:15",
    " Test Files  1 failed (1)",
    " Test Files  1 passed (1)",
    "rspec ./spec/calculator_spec.rb:4 # Calculator adds numbers",
    "2 examples, 1 failure",
    "2 examples, 0 failures",
    "1) Tests\\CalculatorTest::testAdd",
    "/app/tests/CalculatorTest.php:12",
    "FAILURES!",
    "OK (2 tests, 2 assertions)",
    "src/main/java/App.java:5: error: cannot find symbol",
    "[ERROR] /repo/src/main/java/App.java:[5,9] cannot find symbol",
    "[INFO] BUILD FAILURE",
    "[INFO] BUILD SUCCESS",
    "collected 12 items",
    "",
]


def mangle(rng: random.Random, line: str) -> str:
    """A line as is, cut at either end, or with a character changed: literals go missing."""
    op = rng.random()
    if op < 0.5 or not line:
        return line
    if op < 0.7:
        return line[rng.randrange(len(line)) :]
    if op < 0.9:
        return line[: rng.randrange(len(line))]
    i = rng.randrange(len(line))
    return line[:i] + rng.choice("x: =.(") + line[i + 1 :]


def outputs(seed: int, count: int) -> Iterator[tuple[str, int | None]]:
    rng = random.Random(seed)
    for _ in range(count):
        lines = [mangle(rng, rng.choice(LINES)) for _ in range(rng.randint(1, 12))]
        yield "\n".join(lines), rng.choice([None, 0, 1, 2])


def full(text: str, exit_code: int | None) -> RunOutcome:
    return scan(text, exit_code, list(toolchains()))


def fast(text: str, exit_code: int | None) -> RunOutcome:
    return scan(text, exit_code, live_toolchains(text))


@pytest.mark.parametrize("seed", range(4))
def test_prefilter_equals_every_pattern_on_every_line(seed: int) -> None:
    cases = list(outputs(seed, 1500))
    for text, exit_code in cases:
        assert fast(text, exit_code) == full(text, exit_code), text
    # the inputs exercise the parser: failures, passes, diagnostics and dropped toolchains
    results = [full(t, e) for t, e in cases]
    assert {r.verdict for r in results} == {"fail", "pass", "unknown"}
    assert sum(bool(r.diagnostics) for r in results) > 300
    assert min(len(live_toolchains(t)) for t, _ in cases) < len(toolchains()) // 2


@pytest.mark.parametrize("seed", range(2))
def test_the_literals_held_are_each_literal_looked_for(seed: int) -> None:
    """A literal is not looked for when one inside it is missing: the literals found are those
    found looking for every one, in the outputs and in texts made of pieces of the literals."""
    order, _ = diagnostics._literal_needs()
    literals = [literal for literal, _, _ in order]
    assert any(inside for _, _, inside in order)  # some literal holds another
    rng = random.Random(seed)
    texts = [t for t, _ in outputs(seed, 500)]
    for _ in range(500):
        pieces = [rng.choice(literals) for _ in range(rng.randint(0, 4))]
        texts.append(
            "".join(p[: rng.randint(0, len(p))] + rng.choice(["", " ", "x"]) for p in pieces)
        )
    for text in texts:
        want = {literal for literal in literals if literal in text}
        held = diagnostics.held_literals(text)
        assert {literal for literal, bit, _ in order if held & bit} == want


def test_parse_reads_past_a_header_with_the_prefilter() -> None:
    text = "FAILED tests/test_a.py::test_x - AssertionError: boom\n== 1 failed in 0.1s =="
    outcome = diagnostics.parse(text)
    assert outcome.verdict == "fail"
    assert outcome.diagnostics[0]["file"] == "tests/test_a.py"


def test_a_wrong_literal_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A prefilter that wants a literal one pattern does not need drops that pattern's matches:
    the comparison above finds it."""
    target = next(tc.patterns[0] for tc in toolchains() if tc.tool == "pytest")
    real = diagnostics._needs

    def wrong(regex: re.Pattern[str]) -> tuple[str, ...]:
        return (*real(regex), " - ") if regex is target else real(regex)

    monkeypatch.setattr(diagnostics, "_needs", wrong)
    monkeypatch.setattr(diagnostics, "_LIVE", {})
    diagnostics._literal_needs.cache_clear()
    try:
        assert any(fast(t, e) != full(t, e) for t, e in outputs(0, 1500))
    finally:
        diagnostics._literal_needs.cache_clear()


@pytest.mark.needs_shared
def test_prefilter_equals_every_pattern_on_the_corpus() -> None:
    from tests.support.traces import iter_conversations

    checked = 0
    for conversation in iter_conversations():
        for message in conversation.get("messages", []):
            if message.get("role") == "tool" and (text := text_of(message.get("content"))):
                assert fast(text, None) == full(text, None), text[:500]
                checked += 1
    assert checked > 1000
