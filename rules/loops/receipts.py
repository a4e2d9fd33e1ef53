"""Receipts for a citation or lookup miss: when a repeated failure says some todo, step, file or
name was not found, the note lists what the history holds that the call could have meant,
numbered, and the tolerant matcher's near miss (``rules.matching``: the same text but for width,
case or spacing, as a todo "Phase 5：" with a fullwidth colon cited as "Phase 5:").

Candidates come from the conversation alone: the latest plan the agent wrote (its todo tool's
arguments), else checklist lines of recent results, and the paths of recent reads, writes and
listings. Nothing is guessed: with no near miss and no noun saying what was missed, no list."""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from rules.activity.observations import load_arguments, plan_items
from rules.loops.detect import LINE_CHARS, Step
from rules.matching import match

_MISS = re.compile(
    r"(?i)\b(?:no (?:matching|such)|not found|unknown|does not exist|doesn't exist|"
    r"did not match|no match(?:es)?|could not find|couldn't find|cannot find|can't find)\b"
)
_PLAN_NOUNS = re.compile(r"(?i)\b(?:todos?|tasks?|steps?|items?|phases?|plans?|milestones?)\b")
_PATH_NOUNS = re.compile(r"(?i)\b(?:files?|paths?|director(?:y|ies)|folders?|modules?)\b")
_CHECK = re.compile(r"^\s{0,8}(?:[-*]\s{1,3})?(?:\[[ xX~-]\]|[☐☒✓✔✗□■])\s{0,3}(\S.{0,200})$")
MAX_NEEDLE = 300


class Receipts(NamedTuple):
    what: str  # todo | path
    candidates: tuple[str, ...]  # numbered in the note, 1-based
    needle: str  # what the call cited
    near: int | None  # index into candidates of the tolerant matcher's match


def is_miss(error: str) -> bool:
    return bool(_MISS.search(error[:LINE_CHARS]))


def _strings(value: Any, depth: int = 0) -> Iterable[str]:
    if isinstance(value, str):
        if 0 < len(value) <= MAX_NEEDLE:
            yield value
    elif isinstance(value, dict) and depth < 2:
        for v in value.values():
            yield from _strings(v, depth + 1)
    elif isinstance(value, list) and depth < 2:
        for v in value[:20]:
            yield from _strings(v, depth + 1)


def plan_pool(plan: str | None, steps: Sequence[Step]) -> list[str]:
    """The items of the latest plan (``plan``: the arguments of the newest plan call in the whole
    history), else the checklist lines of the newest result with two or more."""
    items = plan_items(plan) if plan else None
    if items:
        return [i["text"] for i in items]
    for s in reversed(steps):
        found = [m.group(1).strip() for ln in s.text.splitlines()[:200] if (m := _CHECK.match(ln))]
        if len(found) >= 2:
            return found
    return []


def path_pool(steps: Sequence[Step]) -> list[str]:
    out: dict[str, None] = {}
    for s in reversed(steps):
        if s.outcome.failed:
            continue  # a path a call failed on is no candidate
        a = s.obs.action
        for p in (a.target, *a.writes) if a.kind in ("read", "write") else a.writes:
            if p:
                out.setdefault(p, None)
    return list(out)[:200]


def find(
    error: str, arguments: str, steps: Sequence[Step], plan: str | None, limit: int
) -> Receipts | None:
    """The receipts for a failure whose error line says something was not found, or None."""
    if not is_miss(error):
        return None
    needles = list(dict.fromkeys(_strings(load_arguments(arguments))))
    if not needles:
        return None
    pools = []
    if _PLAN_NOUNS.search(error[:LINE_CHARS]):
        pools.append(("todo", plan_pool(plan, steps)))
    if _PATH_NOUNS.search(error[:LINE_CHARS]):
        pools.append(("path", path_pool(steps)))
    named = bool(pools)
    if not named:
        pools = [("todo", plan_pool(plan, steps)), ("path", path_pool(steps))]
    for what, pool in pools:
        for needle in needles:
            hit = match(needle, pool)
            if hit.value is not None and hit.value != needle:
                return _listed(what, pool, needle, hit.value, limit)
    for what, pool in pools if named else []:
        if pool:
            return _listed(what, pool, needles[0], None, limit)
    return None


def _listed(what: str, pool: list[str], needle: str, near: str | None, limit: int) -> Receipts:
    """Up to ``limit`` candidates: in the history's order when they all fit, else the nearest to
    the needle (the near miss always among them)."""
    if len(pool) > limit:

        def score(c: str) -> float:
            return difflib.SequenceMatcher(None, needle[:120], c[:120]).ratio()

        kept = set(sorted(pool, key=lambda c: (-score(c), pool.index(c)))[:limit])
        if near is not None and near not in kept:
            kept = set(sorted(kept, key=lambda c: (-score(c), pool.index(c)))[: limit - 1])
            kept.add(near)
        pool = [c for c in pool if c in kept]
    return Receipts(what, tuple(pool), needle, pool.index(near) if near is not None else None)


def difference(needle: str, candidate: str) -> str:
    """Where the cited text first differs from the candidate, in words: ```:` (U+003A) where the
    candidate has `：` (U+FF1A)``; "" when only spacing differs."""
    a, b = needle.strip(), candidate.strip()
    for x, y in zip(a, b, strict=False):
        if x != y:
            if x.isspace() or y.isspace():
                return "spacing"
            return f"`{x}` (U+{ord(x):04X}) where it has `{y}` (U+{ord(y):04X}, {_name(y)})"
    return "spacing" if len(a) != len(b) else ""


def _name(ch: str) -> str:
    return unicodedata.name(ch, "?").lower()
