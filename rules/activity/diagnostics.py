"""Diagnostics parsed from build and test output: each as {tool, file, line, code, message}, plus
the run's verdict (fail / pass / unknown). Patterns per toolchain live in packs/diagnostics.yaml;
Python tracebacks span lines and are parsed here."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from rules.activity.agent_tools import output_header
from rules.packs import load_pack
from rules.redact import redacted_prefix
from rules.regex_literals import required_literals
from rules.text_cache import text_cache

MAX_LINES = 4000  # only the head and tail of huge outputs are scanned: diagnostics cluster there
# Lines are clipped too (a minified bundle is one line of megabytes): no diagnostic is that long,
# and it bounds what any one pattern can cost on a line.
MAX_LINE_CHARS = 4000
MAX_DIAGNOSTICS = 50
MESSAGE_CHARS = 200

_TB_TEXT = "Traceback (most recent call last):"  # in every traceback's first line
_TB_START = re.compile(r"^Traceback \(most recent call last\):\s*$")
_TB_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
# a syntax error in the script Python was asked to run: its place, with no "Traceback" line
# before it, then (past the line and its caret) the error
_SYNTAX_AT = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+)$')
_SYNTAX_EXC = re.compile(r"^(?P<code>SyntaxError|IndentationError|TabError): (?P<message>.*)$")
_SYNTAX_TEXT = '", line '  # in every such place line
_TB_EXC = re.compile(
    r"^(?P<code>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure)|"
    r"[A-Za-z_][\w.]*\.[A-Z]\w+)(?::\s?(?P<message>.*))?$"
)

# ruff's full form: the code and message, then the place on the next line (" --> t.py:1:8")
_RUFF_HEAD = re.compile(r"^(?P<code>[A-Z]{1,5}\d{1,4})(?: \[\*\])? (?P<message>\S.*)$")
_RUFF_AT = re.compile(r"^\s*--> (?P<file>[^\s:]+\.pyi?):(?P<line>\d+):\d+$")
_RUFF_TEXT = "--> "
# PHPUnit's failures: numbered within a "There were 2 failures:" section (not a risky or skipped
# test's, listed the same way), each placed by a "/app/tests/XTest.php:12" line after it
_PHPUNIT_TEXT = "There w"
_PHPUNIT_SECTION = re.compile(r"^There (?:was|were) \d+ (?P<what>\w+)")
_PHPUNIT_ITEM = re.compile(r"^\d+\) (?P<message>[\w\\]+::\w+.*)$")
_PHPUNIT_AT = re.compile(r"^(?P<file>/?[^\s:]+\.php):(?P<line>\d+)$")

# each literal of the pack's patterns: (the literal, its bit, the bits of the literals inside it)
Literals = tuple[tuple[str, int, int], ...]
# Frames in the standard library, installed packages or generated code are not the fix's place.
# an installed package's or the interpreter's own file, or none (``<frozen …>``, ``<string>``)
LIBRARY = re.compile(r"^<|[/\\](?:site-packages|dist-packages|lib[/\\]python\d[\d.]*)[/\\]")


@dataclass(frozen=True)
class _Toolchain:
    tool: str
    category: str
    patterns: tuple[re.Pattern[str], ...]
    context: re.Pattern[str] | None
    location: re.Pattern[str] | None
    fail: tuple[re.Pattern[str], ...]
    passed: tuple[re.Pattern[str], ...]
    # its diagnostics count only with a code or a place from its ``location`` line: cargo's bare
    # "error: …" is also git's ("error: pathspec …") and pip's ("error: subprocess-exited-…")
    placed: bool = False
    # lines that are its diagnostics only in a run it failed (a fail marker or another of its
    # patterns): ``go test -v`` prints a passing test's ``t.Log`` as ``a_test.go:10: …`` and
    # jest a passing suite's ``console.log`` under ``● Console``, as a failure's lines are
    notes: tuple[re.Pattern[str], ...] = ()


@dataclass(frozen=True)
class RunOutcome:
    """What one tool result says: verdict, the categories that failed, diagnostics in order."""

    verdict: str  # "fail" | "pass" | "unknown"
    categories: frozenset[str]
    diagnostics: tuple[dict[str, Any], ...]

    @property
    def is_test_failure(self) -> bool:
        return self.verdict == "fail" and "test" in self.categories

    @property
    def is_build_error(self) -> bool:
        return self.verdict == "fail" and bool(self.categories & {"build", "lint"})


@lru_cache(maxsize=1)
def toolchains() -> tuple[_Toolchain, ...]:
    data = load_pack("diagnostics")  # validated and cached by the pack loader
    out = []
    for tc in data["toolchains"]:
        out.append(
            _Toolchain(
                tool=tc["tool"],
                category=tc["category"],
                patterns=tuple(re.compile(p) for p in tc.get("patterns", [])),
                context=re.compile(tc["context"]) if tc.get("context") else None,
                location=re.compile(tc["location"]) if tc.get("location") else None,
                fail=tuple(re.compile(p) for p in tc.get("fail", [])),
                passed=tuple(re.compile(p) for p in tc.get("pass", [])),
                placed=bool(tc.get("placed")),
                notes=tuple(re.compile(p) for p in tc.get("notes", [])),
            )
        )
    return tuple(out)


def _diag(tool: str, file: Any, line: Any, code: Any, message: Any) -> dict[str, Any]:
    return {
        "tool": tool,
        "file": file or None,
        "line": int(line) if line else None,
        "code": code or None,
        # redacted before the cut: a key the cut split would be kept in part
        "message": redacted_prefix((message or "").strip(), MESSAGE_CHARS),
    }


# OpenHands' (CodeAct's bash, 0.x) note on the interpreter, glued to the output's last line
# ("Success: no issues found in 1 source file[Python Interpreter: /opt/…/python]"): not output
_HARNESS_NOTE = "[Python Interpreter: "


def _lines(text: str) -> list[str]:
    lines = text.splitlines()
    if _HARNESS_NOTE in text:
        lines = [line.split(_HARNESS_NOTE, 1)[0] for line in lines]
    if len(lines) > MAX_LINES:
        half = MAX_LINES // 2
        lines = lines[:half] + lines[-half:]
    return [line[:MAX_LINE_CHARS] for line in lines]  # a short line is not copied


def _tracebacks(lines: list[str]) -> list[dict[str, Any]]:
    """One diagnostic per traceback: the innermost frame's file:line and the exception line."""
    out = []
    i = 0
    while i < len(lines):
        if not _TB_START.match(lines[i]):
            found = _syntax_error(lines, i)
            if found:
                out.append(found)
            i += 1
            continue
        frame: tuple[str, str] | None = None
        own: tuple[str, str] | None = None  # innermost frame in the project's own code
        j = i + 1
        while j < len(lines):
            fm = _TB_FRAME.match(lines[j])
            if fm:
                frame = (fm["file"], fm["line"])
                if not LIBRARY.search(fm["file"]):
                    own = frame
            elif not lines[j].startswith((" ", "\t")) and lines[j].strip():
                em = _TB_EXC.match(lines[j].strip())
                where = own or frame
                if em and where:
                    out.append(_diag("python", where[0], where[1], em["code"], em["message"]))
                break
            j += 1
        i = j + 1
    return out


def _syntax_error(lines: list[str], i: int) -> dict[str, Any] | None:
    """The syntax error whose place is line ``i``, outside any traceback (a traceback's frames
    are read with it): its error at most 3 lines on, past the code and its caret."""
    at = _SYNTAX_AT.match(lines[i]) if _SYNTAX_TEXT in lines[i] else None
    if at is None:
        return None
    for j in range(i + 1, min(i + 4, len(lines))):
        exc = _SYNTAX_EXC.match(lines[j])
        if exc:
            return _diag("python", at["file"], at["line"], exc["code"], exc["message"])
    return None


def _placed_after(lines: list[str]) -> list[dict[str, Any]]:
    """ruff's full form: a rule's code and message, its file:line on the line after."""
    out = []
    for i in range(1, len(lines)):
        at = _RUFF_AT.match(lines[i]) if _RUFF_TEXT in lines[i] else None
        head = _RUFF_HEAD.match(lines[i - 1]) if at else None
        if at and head:
            out.append(_diag("ruff", at["file"], at["line"], head["code"], head["message"]))
    return out


def _phpunit_failures(lines: list[str]) -> list[dict[str, Any]]:
    """PHPUnit's failures and errors, each at the place its next ``file.php:N`` line says."""
    out: list[dict[str, Any]] = []
    code: str | None = None  # in a failures' or errors' section: FAIL or ERROR
    for line in lines:
        section = _PHPUNIT_SECTION.match(line)
        if section:
            what = section["what"]
            code = (
                "FAIL"
                if what.startswith("failure")
                else "ERROR"
                if what.startswith("error")
                else None
            )
        elif code and (item := _PHPUNIT_ITEM.match(line)):
            out.append(_diag("phpunit", None, None, code, item["message"]))
        elif out and out[-1]["line"] is None and (at := _PHPUNIT_AT.match(line)):
            out[-1] = {**out[-1], "file": at["file"], "line": int(at["line"])}
    return out


def _needs(regex: re.Pattern[str]) -> tuple[str, ...]:
    """The literals every match of a pack pattern holds; none for a case-blind one (its literals
    are read as written, the text it matches may differ in case)."""
    if regex.flags & re.IGNORECASE or re.search(r"\(\?[a-zA-Z-]*i", regex.pattern):
        return ()
    return required_literals(regex)


@lru_cache(maxsize=1)
def _literal_needs() -> tuple[Literals, dict[re.Pattern[str], int]]:
    """Every literal a pack pattern needs, each (shortest first) with its bit and the bits of the
    other literals inside it (a text without one of those has not this one either, so it is not
    looked for); and each pattern's literals as a bit mask."""
    needs = {
        regex: _needs(regex)
        for tc in toolchains()
        for regex in (*tc.patterns, *tc.fail, *tc.passed, *tc.notes, tc.context, tc.location)
        if regex is not None
    }
    literals = sorted({s for n in needs.values() for s in n}, key=lambda s: (len(s), s))
    bit = {s: 1 << i for i, s in enumerate(literals)}
    inside = [sum(bit[t] for t in literals if t != s and t in s) for s in literals]
    order = tuple(zip(literals, bit.values(), inside, strict=True))
    return order, {regex: sum(bit[s] for s in n) for regex, n in needs.items()}


_LIVE: dict[int, list[_Toolchain]] = {}  # by the literals a text holds: few sets recur
_LIVE_MAX = 1024


def live_toolchains(text: str) -> list[_Toolchain]:
    """The toolchains with only the patterns that may match some line of ``text``: a pattern
    whose literals are not all in the whole text matches none of its lines (each is a part of
    it), so dropping it changes no line's outcome. A test run's output holds one toolchain's
    words: most patterns go, and the per-line loop runs a few instead of forty."""
    held = held_literals(text)
    live = _LIVE.get(held)
    if live is None:
        live = _live(held, _literal_needs()[1])
        if len(_LIVE) >= _LIVE_MAX:
            _LIVE.clear()
        _LIVE[held] = live
    return live


def held_literals(text: str) -> int:
    """The bits of the literals ``text`` holds (``_literal_needs``' order)."""
    held = 0
    for literal, bit, inside in _literal_needs()[0]:
        if held & inside == inside and literal in text:
            held |= bit
    return held


def _live(held: int, masks: dict[re.Pattern[str], int]) -> list[_Toolchain]:
    def ok(regex: re.Pattern[str] | None) -> bool:
        return regex is not None and masks[regex] & held == masks[regex]

    out = []
    for tc in toolchains():
        live = replace(
            tc,
            patterns=tuple(filter(ok, tc.patterns)),
            context=tc.context if ok(tc.context) else None,
            location=tc.location if ok(tc.location) else None,
            fail=tuple(filter(ok, tc.fail)),
            passed=tuple(filter(ok, tc.passed)),
            notes=tuple(filter(ok, tc.notes)),
        )
        if live.patterns or live.context or live.location or live.fail or live.passed or live.notes:
            out.append(live)
    return out


@text_cache(max_chars=16_000_000)
def parse(text: str, exit_code: int | None = None) -> RunOutcome:
    """Diagnostics and verdict of one tool output (cached: outputs repeat across requests).
    A Codex-style header (``Chunk ID:``, ``Wall time:``, ``Process exited with code N`` …
    ``Output:``) is not output: only the text after it is read, and its exit code counts when
    none is given."""
    header = output_header(text)
    if header is not None:
        text = header.body
        exit_code = header.exit_code if exit_code is None else exit_code
    return scan(text, exit_code, live_toolchains(text))


def scan(text: str, exit_code: int | None, chains: list[_Toolchain]) -> RunOutcome:
    """``parse`` of a text without its header, with these toolchains (``toolchains()``, or the
    ones ``live_toolchains`` keeps: the outcome is the same)."""
    lines = _lines(text)
    diags: list[dict[str, Any]] = []
    failed: set[str] = set()
    failed_tools: set[str] = set()  # whose notes count (``_Toolchain.notes``)
    noted: dict[int, str] = {}  # where notes are: their toolchain's, until it fails
    passed = False
    current_file: dict[str, str] = {}
    unplaced: set[int] = set()  # where a ``placed`` toolchain's unplaced ones are
    for raw in lines:
        if not chains:
            break
        line = raw.rstrip()
        for tc in chains:
            if tc.context:
                cm = tc.context.match(line)
                if cm:
                    current_file[tc.tool] = cm["file"]
                    if tc.tool == "jest":
                        diags.append(_diag(tc.tool, cm["file"], None, "FAIL", "test suite failed"))
                        failed.add(tc.category)
                        failed_tools.add(tc.tool)
                    break
            if tc.location and diags and diags[-1]["tool"] == tc.tool and not diags[-1]["line"]:
                lm = tc.location.match(line)
                if lm:
                    if len(diags) - 1 in unplaced:
                        unplaced.discard(len(diags) - 1)
                        failed.add(tc.category)
                        failed_tools.add(tc.tool)
                    diags[-1] = {**diags[-1], "file": lm["file"], "line": int(lm["line"])}
                    break
            # most live toolchains keep one or two of these kinds: an empty one costs no generator
            if tc.fail and any(p.search(line) for p in tc.fail):
                failed.add(tc.category)
                failed_tools.add(tc.tool)
                break
            if tc.passed and any(p.search(line) for p in tc.passed):
                passed = True
                break
            matched = (
                next((m for p in tc.patterns if (m := p.match(line))), None)
                if tc.patterns
                else None
            )
            if matched:
                g = matched.groupdict()
                file = g.get("file") or current_file.get(tc.tool)
                diags.append(_diag(tc.tool, file, g.get("line"), g.get("code"), g.get("message")))
                if tc.placed and not (file or g.get("code")):
                    unplaced.add(len(diags) - 1)  # until its location line places it
                else:
                    failed.add(tc.category)
                    failed_tools.add(tc.tool)
                break
            note = next((m for p in tc.notes if (m := p.match(line))), None) if tc.notes else None
            if note:
                g = note.groupdict()
                file = g.get("file") or current_file.get(tc.tool)
                diags.append(_diag(tc.tool, file, g.get("line"), g.get("code"), g.get("message")))
                noted[len(diags) - 1] = tc.tool
                break
    dropped = unplaced | {i for i, tool in noted.items() if tool not in failed_tools}
    if dropped:
        diags = [d for i, d in enumerate(diags) if i not in dropped]
    placed = _placed_after(lines) if _RUFF_TEXT in text else []
    if placed:
        diags.extend(placed)
        failed.add("lint")
    listed = _phpunit_failures(lines) if _PHPUNIT_TEXT in text else []
    if listed:
        diags.extend(listed)
        failed.add("test")
    tracebacks = _tracebacks(lines) if _TB_TEXT in text or _SYNTAX_TEXT in text else []
    diags.extend(tracebacks)
    if tracebacks and (exit_code not in (0, None) or not passed):
        failed.add("runtime")
    if failed:
        verdict = "fail"
    elif passed or exit_code == 0:
        verdict = "pass"
    else:
        verdict = "fail" if exit_code else "unknown"
    return RunOutcome(verdict, frozenset(failed), tuple(diags[:MAX_DIAGNOSTICS]))
