"""Loading the YAML packs in ``rules/packs/`` plus the user's own pack files.

A user pack is a YAML mapping whose top-level keys name the packs it extends (``tools``,
``shell_verbs``, ``references``): lists are appended (duplicates dropped), mappings merged
recursively, scalars replaced. Loading happens when a rule's config is validated (a bad file fails
at start-up); the result is cached per tuple of extra files, so requests only look it up.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from rules.regex_literals import compile_once

BUILTIN_DIR = Path(__file__).resolve().parent


def merge(base: Any, extra: Any) -> Any:
    """``extra`` laid over ``base``: lists appended (no duplicates), mappings merged."""
    if isinstance(base, Mapping) and isinstance(extra, Mapping):
        out = dict(base)
        for key, value in extra.items():
            out[key] = merge(out[key], value) if key in out else value
        return out
    if isinstance(base, list) and isinstance(extra, list):
        return base + [v for v in extra if v not in base]
    return extra


# libyaml's parser when PyYAML was built with it (the same resolver, the same values: ~6x faster,
# 11 ms where 73 for the references pack); the pure-Python one otherwise. Both safe: no tag
# builds an object
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read pack {path}: {exc}") from None


@functools.lru_cache(maxsize=64)
def load_pack(name: str, extra_files: tuple[str, ...] = ()) -> Mapping[str, Any]:
    """The built-in pack ``name`` with the ``name:`` sections of ``extra_files`` merged in.

    Raises ValueError (which pydantic reports with the option's path) for a missing or bad file.
    """
    builtin = _read_yaml(BUILTIN_DIR / f"{name}.yaml")
    if not isinstance(builtin, dict):
        raise ValueError(f"built-in pack {name} is not a mapping")
    data: dict[str, Any] = builtin
    for file in extra_files:
        extra = _read_yaml(Path(file))
        if not isinstance(extra, dict):
            raise ValueError(f"pack file {file} must be a mapping of pack name -> content")
        section = extra.get(name)
        if section is None:
            continue
        if not isinstance(section, dict):
            raise ValueError(f"pack file {file}: section {name!r} must be a mapping")
        data = merge(data, section)
    return data


def preload() -> tuple[str, ...]:
    """Every built-in pack read now (at start-up), not by the first request whose rule needs it:
    a rule reading a pack lazily (prune's first look reads two) would add its parse to that
    request. Returns the packs' names."""
    names = tuple(sorted(path.stem for path in BUILTIN_DIR.glob("*.yaml")))
    for name in names:
        load_pack(name)
    return names


# --- Pack regexes run on client text: each must be linear -----------------------------------------
#
# Python's ``re`` backtracks: ``^\s*Error`` under re.M is quadratic on blank lines (each line start
# rescans every newline after it: 40,000 took 7.5 s, blocking the event loop). Pack patterns are
# data users extend, so a pattern from a user's pack is run at start-up on adversarial inputs built
# from its own parts, and one that is slow, or whose time grows faster than its input, fails the
# configuration. Built-in patterns are checked by tests/rules/packs/test_regex_budget.py instead (on
# inputs of 1 MiB), so starting the server costs nothing for them.

PROBE_CHARS = 16_384  # the largest input at start-up; a linear pattern takes well under 1 ms
PROBE_SECONDS = 0.1  # the limit per input: a built-in template (ko recent[12]) takes 0.041-0.050 s
SUPERLINEAR = 1.6  # time grows as size ** this or faster (quadratic: 2, linear: 1): too slow
_MEASURABLE = 0.002  # timings below this are noise: growth is not judged on them
_MAX_DERIVED = 64  # inputs of each kind built from a pattern (an alternation has hundreds)
# Units repeated on their own: blank lines in every convention, runs of one character.
GENERIC_UNITS = ("\n", "\r\n", " \n", "\t\r\n", " ", "\t", "a", "0", "-", ".", "a ", "a\n", "\\")
_CANDIDATES = "a0 x-_./:Z\n\t\"'=@#"
_CATEGORIES = {  # a character of each class, and the class as a regex
    "CATEGORY_DIGIT": ("0", r"\d"),
    "CATEGORY_NOT_DIGIT": ("a", r"\D"),
    "CATEGORY_SPACE": (" ", r"\s"),
    "CATEGORY_NOT_SPACE": ("a", r"\S"),
    "CATEGORY_WORD": ("a", r"\w"),
    "CATEGORY_NOT_WORD": (" ", r"\W"),
    "CATEGORY_LINEBREAK": ("\n", r"\n"),
    "CATEGORY_NOT_LINEBREAK": ("a", r"[^\n]"),
}


class Probe(NamedTuple):
    """An adversarial input: ``head + unit * n + tail`` for growing n."""

    head: str
    unit: str
    tail: str = ""

    def text(self, n: int) -> str:
        return self.head + self.unit * n + self.tail

    def describe(self, n: int) -> str:
        return f"{self.head[:40]!r} + {self.unit[:40]!r} * {n} + {self.tail!r}"


def _in_set(items: list[tuple[Any, Any]], ch: str) -> bool:
    for op, av in items:
        name = str(op)
        if name == "LITERAL" and chr(av) == ch:
            return True
        if name == "RANGE" and av[0] <= ord(ch) <= av[1]:
            return True
        if name == "CATEGORY" and re.fullmatch(_CATEGORIES.get(str(av), ("", "(?!)"))[1], ch):
            return True
    return False


def _set_char(items: list[tuple[Any, Any]]) -> str:
    """A character a parsed set ``[...]`` accepts."""
    if items and str(items[0][0]) == "NEGATE":
        return next((c for c in _CANDIDATES if not _in_set(items[1:], c)), "\x01")
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            return chr(av)
        if name == "RANGE":
            return chr(av[0])
        if name == "CATEGORY":
            return _CATEGORIES.get(str(av), ("a", ""))[0]
    return "a"


def _set_chars(items: list[tuple[Any, Any]]) -> list[str]:
    """The characters a parsed set names: where its matches start and stop."""
    out = []
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(av))
        elif name == "RANGE":
            out += [chr(av[0]), chr(av[1])]
        elif name == "CATEGORY":
            out.append(_CATEGORIES.get(str(av), ("a", ""))[0])
    return out


class _Walk:
    """Over a parsed pattern: a string that (nearly) matches it along its first branches, the
    literals on that path, and at each unbounded repeat the text before it and one iteration of
    its body. The material of adversarial inputs."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str]] = []
        self.literals: list[str] = []
        self.alphabet: dict[str, None] = {}  # characters its sets name, in order

    def walk(self, items: Any, prefix: str, primary: bool = True) -> str:
        out, literal = prefix, ""
        for op, av in items:
            name = str(op)
            if name != "LITERAL" and literal:
                self.literals += [literal] if primary else []
                literal = ""
            if name == "LITERAL":
                out += chr(av)
                literal += chr(av)
            elif name == "NOT_LITERAL":
                out += next(c for c in _CANDIDATES if c != chr(av))
            elif name == "ANY":
                out += "a"
            elif name == "IN":
                out += _set_char(av)
                self.alphabet.update(dict.fromkeys(_set_chars(av)))
            elif name == "SUBPATTERN":
                out = self.walk(av[-1], out, primary)
            elif name == "ATOMIC_GROUP":
                out = self.walk(av, out, primary)
            elif name == "BRANCH":
                first, *others = av[1]
                for branch in others:
                    self.walk(branch, out, primary=False)
                out = self.walk(first, out, primary)
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                low, high, body = av
                once = self.walk(body, out, primary)[len(out) :]  # runs inside see ``out``
                if high > 64:  # MAXREPEAT (unbounded) is a large int too
                    self.runs.append((out, once))
                out += once * low  # none of an optional part: ``a.*\b0`` keeps its boundary
            elif name in ("ASSERT", "ASSERT_NOT"):
                self.walk(av[1], out, primary=False)  # its repeats count; it adds no text
        if literal and primary:
            self.literals.append(literal)
        return out


def probes(pattern: re.Pattern[str]) -> list[Probe]:
    """Adversarial inputs for ``pattern``: the generic units, then its own parts repeated (the
    string it nearly matches and its halves, its literals, each with a character missing or a
    space added), and at each unbounded repeat the text before it followed by a long run of the
    repeat's body (with and without a character that ends any match)."""
    out = [Probe("", u) for u in GENERIC_UNITS]
    try:
        from re import _parser  # type: ignore[attr-defined]  # private, stable since 3.11

        tree = _parser.parse(pattern.pattern, pattern.flags & ~re.UNICODE)
    except Exception:  # another Python: the generic units only
        return out
    walker = _Walk()
    witness = walker.walk(tree, "")
    runs = []
    for i, (head, once) in enumerate(walker.runs):
        for unit in dict.fromkeys([once, once[:1]]):
            if unit:
                runs += [Probe(head, unit), Probe(head, unit, "\x00"), Probe("", head + unit)]
        # what follows an earlier repeat, over and over: ``.+?( \[[^]]+)?$`` on `` [a [a [a``
        earlier = [h for h, _ in walker.runs[:i] if head.startswith(h) and h != head]
        runs += [Probe(h, head[len(h) :] + once) for h in dict.fromkeys(earlier[-1:] + earlier[:1])]
    units = [witness, witness[:-1], witness[: len(witness) // 2]]
    for lit in walker.literals:
        units += [lit, lit[:-1], lit + " "]
    own = [Probe("", u) for u in units if u]
    # each character the sets name, after each repeat: ``[\w.]*[./][\w./]*\w`` on ``x`` + dots
    heads = dict.fromkeys(head for head, _ in walker.runs)
    chars = list(walker.alphabet)[:16]
    stops = [Probe(h, c, "\x00") for h in heads for c in chars]
    return list(
        dict.fromkeys(out + runs[:_MAX_DERIVED] + own[:_MAX_DERIVED] + stops[:_MAX_DERIVED])
    )


def _reps(unit_chars: int, size: int) -> list[int]:
    """Repetition counts: one more at a time at first (an exponential pattern doubles its time
    with each), then doubling up to ``size`` characters."""
    top = max(1, size // max(1, unit_chars))
    steps = list(range(1, min(top, 24) + 1))
    while steps[-1] < top:
        steps.append(min(top, steps[-1] * 2))
    return steps


def _elapsed(pattern: re.Pattern[str], text: str, tries: int = 1) -> float:
    """The best of ``tries`` timings in this thread's CPU time: other processes on a busy
    machine (or this one's other threads) don't inflate it, so a linear pattern is not refused
    because the machine was loaded when the config was read."""
    best = float("inf")
    for _ in range(tries):
        started = time.thread_time()
        for _match in pattern.finditer(text):
            pass
        best = min(best, time.thread_time() - started)
    return best


def _growth(pattern: re.Pattern[str], probe: Probe, small: int, big: int) -> tuple[float, float]:
    """How the time grows from ``small`` to ``big`` repetitions, as the exponent of the size (best
    of three timings each), and the time at ``big``."""
    a, b = probe.text(small), probe.text(big)
    before = max(_elapsed(pattern, a, 3), 1e-6)
    took = max(_elapsed(pattern, b, 3), 1e-6)
    return math.log(took / before) / math.log(len(b) / len(a)), took


def slow_input(
    pattern: re.Pattern[str], size: int = PROBE_CHARS, limit: float = PROBE_SECONDS
) -> str | None:
    """How ``pattern`` fails the budget on an adversarial input of up to ``size`` characters
    (over ``limit`` seconds, or time growing superlinearly), or None when it keeps it."""
    for probe in probes(pattern):
        room = max(1, size - len(probe.head) - len(probe.tail))
        done: list[tuple[int, float]] = []  # repetition counts tried, and their times
        for n in _reps(len(probe.unit), room):
            text = probe.text(n)
            took = _elapsed(pattern, text)
            if took > limit and (took := _elapsed(pattern, text, 2)) > limit:
                return f"{took:.3f} s on {probe.describe(n)}"
            if took > _MEASURABLE and len(done) >= 2 and n >= 3.5 * done[-2][0]:
                # judged on the timings at hand first; only a growth that looks superlinear is
                # timed again (best of three): most of the check's time went to re-timing
                # linear patterns
                m, before = done[-2]
                growth = math.log(took / max(before, 1e-6)) / math.log(n / m)
                if growth > SUPERLINEAR:
                    growth, took = _growth(pattern, probe, m, n)
                if growth > SUPERLINEAR and took > _MEASURABLE:
                    # a busy machine can fake it at these sizes: confirm on a 4x larger input
                    growth, took = _growth(pattern, probe, n, 4 * n)
                    if growth > SUPERLINEAR or took > 4 * limit:
                        return f"time grows as size^{growth:.1f} on {probe.describe(4 * n)}"
            done.append((n, took))
    return None


@functools.lru_cache(maxsize=1024)
def _verdict(source: str, flags: int) -> str | None:
    return slow_input(re.compile(source, flags))


def too_slow(pattern: re.Pattern[str]) -> str | None:
    """``slow_input(pattern)`` with the defaults, remembered per pattern."""
    return _verdict(pattern.pattern, pattern.flags)


def compile_regex(source: str, flags: int, where: str, check: bool = True) -> re.Pattern[str]:
    """``re.compile(source, flags)``; a ValueError naming the pattern when it is not a regex or,
    with ``check``, when it backtracks too much on an adversarial input."""
    try:
        pattern = compile_once(source, flags)
    except re.error as exc:
        raise ValueError(f"{where}: bad regex {source!r}: {exc}") from None
    slow = _verdict(source, flags) if check else None
    if slow:
        raise ValueError(
            f"{where}: regex {source!r} is too slow on large input ({slow}; the limit is "
            f"{PROBE_SECONDS} s on {PROBE_CHARS} characters, growing linearly): it would stall "
            r"the server on a big tool result. Under ^ use [ \t]* rather than \s* (which spans "
            "lines), and avoid repeats next to each other that can match the same text."
        )
    return pattern


@functools.lru_cache(maxsize=16)
def builtin_strings(name: str) -> frozenset[str]:
    """Every string in the built-in pack ``name``: its patterns are checked by the test suite."""
    out: set[str] = set()

    def visit(value: Any) -> None:
        if isinstance(value, str):
            out.add(value)
        elif isinstance(value, Mapping):
            for v in value.values():
                visit(v)
        elif isinstance(value, list):
            for v in value:
                visit(v)

    visit(_read_yaml(BUILTIN_DIR / f"{name}.yaml"))
    return frozenset(out)
