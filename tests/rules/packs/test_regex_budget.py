"""Regexes run on client text stay linear: a tool result or a user message of a few MiB, however
built (blank lines, long runs of one character, a pattern's own literals over and over), never
blocks the event loop. Every built-in pack pattern is run on adversarial inputs of up to 256 KiB
under a time limit; the start-up check rejects a user's pattern that is not linear (each of the
patterns the packs shipped with before is rejected) when the rule's config is validated."""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rules.activity import (
    brace_expand,
    cron_entries,
    diagnostics,
    observations,
    python_effects,
    script_writes,
)
from rules.activity.entity_pack import load_entity_pack
from rules.activity.entity_pack import pack_patterns as entity_pack_patterns
from rules.activity.file_tools import SCAN_CHARS, cwd_hint, load_tools, scanned, succeeded
from rules.activity.shell_verbs_pack import load_verbs
from rules.entities import resolve_refs, several, track_entities
from rules.entities.ref_detect import detect, load_lexicons, strip_injected
from rules.messages import INJECT_OPEN
from rules.packs import GENERIC_UNITS, Probe, compile_regex, probes, too_slow
from tests.support.cpu_clock import cpu_timer
from tests.support.factories import assistant, ctx, result, shell, system, user

MIB = 1 << 20
LARGEST = MIB >> 2
# CPU seconds for one adversarial input of 256 KiB. A linear pattern takes from microseconds to
# about a tenth of a second (the relation templates: long alternations with optional heads are
# tried at every position, ~0.47 s a MiB on a quiet machine); a quadratic one takes minutes, and
# fails at a smaller size first, since the sizes grow fourfold.
LIMIT = 0.6
QUADRATIC_GROWTH = (LARGEST // (LARGEST >> 4)) ** 2  # the time a quadratic pattern grows by


def pack_patterns() -> list[tuple[str, re.Pattern[str]]]:
    """Every built-in pack pattern as compiled, and the regexes in code that read client text."""
    out: list[tuple[str, re.Pattern[str]]] = []
    tools = load_tools()
    for field in ("folder_results", "exit_codes", "failures", "cwd_hints"):
        out += [(f"tools.{field}[{i}]", p) for i, p in enumerate(getattr(tools, field))]
    out += [(f"tools.name_rules[{i}]", r[0]) for i, r in enumerate(tools.name_rules)]
    for tc in diagnostics.toolchains():
        found = [*tc.patterns, *tc.fail, *tc.passed, *tc.notes, tc.context, tc.location]
        out += [(f"diagnostics.{tc.tool}[{i}]", p) for i, p in enumerate(found) if p is not None]
    _, lexicons = load_lexicons()
    for lex in lexicons:
        out += [
            (f"references.{lex.lang}.{p.kind}[{i}]", p.regex) for i, p in enumerate(lex.patterns)
        ]
        out += [
            (f"references.{lex.lang}.not_refs[{i}]", p.regex) for i, p in enumerate(lex.not_refs)
        ]
        if lex.script is not None:
            out.append((f"references.{lex.lang}.script", lex.script))
        if lex.antecedent is not None:
            out.append((f"references.{lex.lang}.antecedent", lex.antecedent))
    out += entity_pack_patterns(load_entity_pack())
    printed = load_verbs().printed
    out += [(f"shell_verbs.printed_files[{i}]", r.regex) for i, r in enumerate(printed)]
    for lex in lexicons:
        for label, p in (("object_before", lex.object_before), ("object_after", lex.object_after)):
            if p is not None:
                out.append((f"references.{lex.lang}.{label}", p))
    code = [diagnostics._TB_START, diagnostics._TB_FRAME, diagnostics._TB_EXC,
            diagnostics.LIBRARY, diagnostics._RUFF_HEAD, diagnostics._RUFF_AT,
            diagnostics._PHPUNIT_SECTION, diagnostics._PHPUNIT_ITEM, diagnostics._PHPUNIT_AT,
            diagnostics._SYNTAX_AT, diagnostics._SYNTAX_EXC,
            script_writes._BOUND, script_writes._NAME_WRITE,
            *observations._EXIT, python_effects._BOUND,
            *(p for _, _, p in python_effects._CALLS)]  # fmt: skip
    out += [(f"code[{i}]", p) for i, p in enumerate(code)]
    out.append(("code.brace_range", brace_expand._RANGE))
    out.append(("code.cron_line", cron_entries._CRON_LINE))
    out += [
        (f"code.several.{label}", p)
        for label, p in (
            ("before", several._BEFORE), ("within", several._WITHIN), ("after", several._AFTER)
        )
    ]  # fmt: skip
    return out


PACK_PATTERNS = pack_patterns()
IDS = [label for label, _ in PACK_PATTERNS]


# ----- every built-in pattern -----


def _adversarial_probes(pattern: re.Pattern[str]) -> list[Probe]:
    """The generic units, and a long run after each repeat of the pattern (its own parts)."""
    own = [p for p in probes(pattern) if p.head and p.tail]
    return [Probe("", u) for u in GENERIC_UNITS] + own[:12]


@pytest.mark.parametrize("pattern", [p for _, p in PACK_PATTERNS], ids=IDS)
def test_builtin_pattern_passes_the_startup_check_and_a_quarter_mebibyte(
    pattern: re.Pattern[str],
) -> None:
    # first the check users' patterns get at start-up (inputs grown to 16 KiB, time limit and
    # growth): a superpolynomial pattern fails there rather than hang below
    assert too_slow(pattern) is None
    for probe in _adversarial_probes(pattern):
        for size in (LARGEST >> 4, LARGEST):  # growing: a bad one fails, not hangs
            n = max(1, (size - len(probe.head) - len(probe.tail)) // len(probe.unit))
            text = probe.text(n)
            with cpu_timer() as took:
                for _ in pattern.finditer(text):
                    pass
            assert took.seconds < LIMIT, f"{took.seconds:.2f} s on {probe.describe(n)}"
            if took.seconds * QUADRATIC_GROWTH < LIMIT / 4:
                # even quadratic from here, the large input could not near the limit (and the
                # start-up check has measured the growth on inputs up to 16 KiB): not run
                break


# The patterns the packs shipped with before: each is superlinear, and the check says so.
OLD_PATTERNS = [
    (r"^\s*(?:Error|ERROR)\b", re.I | re.M),  # 40,000 blank lines: 7.5 s
    (r"\(Current directory: (?P<cwd>[^)\n]+)\)", re.I | re.M),
    (r"\[Current working directory: (?P<cwd>[^\]\n]+)\]", re.I | re.M),
    (r"^=+ .*\b\d+ (?:failed|errors?)\b.*=+$", 0),
    (r"^=+ (?!.*\b(?:failed|errors?)\b).*\b\d+ passed\b.*=+$", 0),
    (r"^\s+(?P<line>\d+):\d+\s+error\s+(?P<message>.+?)\s{2,}(?P<code>[\w/@-]+)$", 0),
    (r"^\s*(?:\S+ : )?error (?P<code>(?:CS|MC)\d{3,5}): (?P<message>.+?)(?: \[[^\]]+\])?$", 0),
    (r"\b(?:the|this)\s+new\s+(?:file|folder)\s+(?:[`\"'(]|[\w~.-]*[./][\w~./-]*\w)", re.I),
    (r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),  # redact
    (r"\{.*\}", re.S),  # the resolver's answer
    (r"(a+)+b", 0),  # exponential: caught on a few dozen characters
]


@pytest.mark.parametrize(("source", "flags"), OLD_PATTERNS)
def test_the_check_rejects_superlinear_patterns(source: str, flags: int) -> None:
    with pytest.raises(ValueError, match="too slow on large input") as info:
        compile_regex(source, flags, "tools pack")
    assert repr(source) in str(info.value)


LINEAR_PATTERNS = [
    r"^[^\S\n]*(?:Error|ERROR)\b",
    r"No such file or directory",
    r"exit code (?P<code>\d+)",
]


@pytest.mark.parametrize("source", LINEAR_PATTERNS)
def test_the_check_passes_linear_patterns(source: str) -> None:
    assert compile_regex(source, re.I | re.M, "tools pack").pattern == source


def test_the_probe_times_its_own_cpu_not_the_wall_clock() -> None:
    """A loaded machine does not make a linear pattern look slow: the probe's timing is its own
    thread's CPU time. Here another thread takes the interpreter for ~0.1 s at a time (a C-level
    loop that never lets go) while the probe runs: the wall clock counts those waits, the probe
    must not."""
    from rules.packs import _elapsed

    stop = threading.Event()

    def hog() -> None:
        while not stop.is_set():
            sum(range(3_000_000))  # holds the interpreter throughout

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.001)  # the probe's loop lets the other thread in every millisecond
    worker = threading.Thread(target=hog, daemon=True)
    worker.start()
    try:
        for _ in range(5):  # until the other thread did get in (the scheduler may not let it)
            started = time.perf_counter()
            took = _elapsed(re.compile(r"\w+"), "ab " * 100_000)  # 100,000 matches: ~10 ms of CPU
            wall = time.perf_counter() - started
            if wall > 0.05:
                break
    finally:
        stop.set()
        sys.setswitchinterval(interval)
        worker.join()
    assert wall > 0.05  # the premise: the other thread ran while the probe was timing
    assert took < wall / 3


def test_a_slow_pattern_in_a_user_pack_fails_the_config(tmp_path: Path) -> None:
    """At start-up, when the rule's config is validated. (How settings name the option:
    tests/proxy/test_settings_packs.py.)"""
    tools = tmp_path / "tools.yaml"
    tools.write_text("tools:\n  failures: ['^\\s*(?:Error|ERROR)\\b']\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="too slow on large input") as info:
        track_entities.Config(extra_packs=(str(tools),))
    assert r"'^\\s*(?:Error|ERROR)\\b'" in str(info.value)
    refs = tmp_path / "refs.yaml"
    refs.write_text(
        "references:\n  languages:\n    en:\n      not_refs: ['{dem}\\s*\\s*{type}\\s*\\s*$']\n",
        encoding="utf-8",
    )
    with pytest.raises(ValidationError, match="too slow on large input"):
        resolve_refs.Config(extra_packs=(str(refs),))


def test_a_linear_user_pattern_loads(tmp_path: Path) -> None:
    tools = tmp_path / "tools.yaml"
    tools.write_text("tools:\n  failures: ['^FATAL:', 'panic: .+']\n", encoding="utf-8")
    cfg = track_entities.Config(extra_packs=(str(tools),))
    assert not succeeded(load_tools(cfg.extra_packs), "ok\nFATAL: no space left")


# ----- the rules, end to end, on adversarial tool results and user text -----


def _track(tool_result: str) -> Any:
    messages = [
        system(),
        user("clean up"),
        assistant(None, shell("c1", "mkdir out")),
        result("c1", tool_result),
    ]
    return track_entities.apply(ctx(messages, now=1000.0), track_entities.Config())


@pytest.mark.parametrize("unit", ["\n", "\r\n", " \n", "\t\r\n"])
def test_blank_line_tool_result_is_fast(unit: str) -> None:
    # 40,000 blank lines took 7.5 s through the old failure pattern ``^\s*(?:Error|ERROR)\b``
    text = unit * 40_000
    with cpu_timer() as took:
        out = _track(text)
    assert took.seconds < 0.5
    assert [e["path"] for e in out.state.get("entities")] == ["out"]


@pytest.mark.parametrize(
    "text",
    [
        "\n" * (3 * MIB),
        "(Current directory: a" * 100_000,
        "x" * (3 * MIB) + "\nError: boom",  # the tail is read
    ],
    ids=["blank-lines", "open-footers", "error-at-the-end"],
)
def test_huge_tool_results_are_fast(text: str) -> None:
    with cpu_timer() as took:
        _track(text)
    assert took.seconds < 0.5


def test_only_the_head_and_tail_of_a_result_are_scanned() -> None:
    body = "line\n" * (SCAN_CHARS // 2)
    assert scanned("short\nError") == "short\nError"
    head_and_tail = scanned("Error: first\n" + body + "(Current directory: /w)\n")
    assert head_and_tail.startswith("Error: first\n") and len(head_and_tail) <= 2 * SCAN_CHARS + 1
    assert head_and_tail.endswith("(Current directory: /w)\n")
    assert all(line in ("line", "Error: first", "(Current directory: /w)", "")
               for line in head_and_tail.split("\n"))  # cut at line ends  # fmt: skip
    tools = load_tools()
    assert not succeeded(tools, "Error: first\n" + body)
    assert succeeded(tools, "x\n" + body + "Error: in the middle\n" + body)  # not read: too deep
    assert cwd_hint(tools, body + body + "(Current directory: /w)") == "/w"


@pytest.mark.parametrize(
    "line",
    [
        "  1:1  error  " + " " * 200_000 + "x",  # eslint: was quartic
        "= 0 failed " + "=" * 200_000 + "x",  # pytest summary: quadratic
        "= " + "0 failed " * 30_000 + "x",  # cubic
        "error CS0001: a" + " [a" * 60_000,  # dotnet: quadratic
    ],
    ids=["eslint", "pytest", "pytest-repeats", "dotnet"],
)
def test_diagnostics_on_adversarial_lines_are_fast(line: str) -> None:
    with cpu_timer() as took:
        diagnostics.parse.__wrapped__(line * 3)  # type: ignore[attr-defined]  # not the memo
    assert took.seconds < 0.5


def test_diagnostics_clip_long_lines_but_keep_results() -> None:
    eslint = "src/a.js\n  3:7  error  'x' is defined but never used  no-unused-vars\n"
    assert diagnostics.parse(eslint).diagnostics[0]["code"] == "no-unused-vars"
    summary = "==== 2 failed, 3 passed in 0.1s ====\n"
    assert diagnostics.parse(summary).verdict == "fail"
    assert diagnostics.parse("==== 3 passed in 0.1s ====\n").verdict == "pass"
    assert diagnostics.parse("x" * 50_000 + "\n" + summary).verdict == "fail"


def test_reference_detection_is_linear_in_mentions() -> None:
    kinds, lexicons = load_lexicons()
    text = "it " * 100_000  # each mention was tested against every earlier one
    with cpu_timer() as took:
        found = detect(text, kinds, lexicons, ("en",))
    # ~1.6-2.8 s alone on 2 cores (200,000 mentions: twice that); it was quadratic in the
    # mentions, 5e9 comparisons here
    assert took.seconds < 8.0
    assert len(found) == 100_000


def test_injected_blocks_are_stripped_in_linear_time() -> None:
    # (the resolver model's answers: tests/proxy/rewrite/test_resolver.py)
    with cpu_timer() as took:
        assert strip_injected(INJECT_OPEN * 200_000) == " "
    assert took.seconds < 0.5


def test_an_upload_line_pattern_stops_at_each_carriage_return() -> None:
    """The S3 upload lines are read after a progress line's ``\\r``: a lazy run to the line's
    end from every ``\\rupload: `` read 4 KiB each (0.29 s on 54 KB of them, 1 ms now)."""
    (pattern,) = {p for label, p in PACK_PATTERNS if "upload:" in p.pattern}
    with cpu_timer() as took:
        for _ in pattern.finditer("\rupload: " * 6000):
            pass
    assert took.seconds < 0.05
