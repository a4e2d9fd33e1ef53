"""Brace expansion of a shell word, as bash does it before running a command: ``project/{src,
tests}`` is ``project/src`` and ``project/tests``, ``file{,.bak}`` is ``file`` and
``file.bak``, ``day{1..3}.md`` three files. Bounded: at most ``MAX_WORDS`` words per word, a
range of at most that many steps, words of at most ``MAX_CHARS`` characters; each group is
found in one pass over the word (a stack of open braces), and the passes read ``MAX_SCANNED``
characters at most: a word's expansion costs at most a few times its bound, whatever it makes.
A word whose braces were quoted (``sed '/a/,/b/{p}'``, ``jq '{a,b}'``) is not expanded: the
lexer marks it (``SimpleCommand.literal``).
"""

from __future__ import annotations

import itertools
import re

MAX_WORDS = 32  # words one word expands to
MAX_CHARS = 4_096  # a longer word is left as written
MAX_SCANNED = 8 * MAX_CHARS  # characters one word's expansion reads, its partial words too
_RANGE = re.compile(r"(-?\d{1,6})\.\.(-?\d{1,6})|([a-zA-Z])\.\.([a-zA-Z])")


def _group(word: str) -> tuple[int, int, list[str]] | None:
    """The leftmost brace group that expands: (its start, its end, its alternatives)."""
    stack: list[tuple[int, list[int]]] = []  # open brace, commas at its level
    best: tuple[int, int, list[int]] | None = None
    for i, c in enumerate(word):
        if c == "{":
            stack.append((i, []))
        elif c == "," and stack:
            stack[-1][1].append(i)
        elif c == "}" and stack:
            start, commas = stack.pop()
            fits = commas or _RANGE.fullmatch(word, start + 1, i)
            if fits and (best is None or start < best[0]):
                best = (start, i, commas)
    if best is None:
        return None
    start, end, commas = best
    if not commas:
        return start, end, _range(word[start + 1 : end])
    cuts = [start, *commas, end]
    return start, end, [word[a + 1 : b] for a, b in itertools.pairwise(cuts)]


def _range(text: str) -> list[str]:
    """``1..3`` (``3..1`` counts down), ``a..e``: its first ``MAX_WORDS`` steps."""
    m = _RANGE.fullmatch(text)
    if m is None:
        return [text]
    digits = m.group(1) is not None
    a, b = (int(m.group(1)), int(m.group(2))) if digits else (ord(m.group(3)), ord(m.group(4)))
    step = 1 if b >= a else -1
    last = a + step * min(abs(b - a), MAX_WORDS - 1)
    return [str(n) if digits else chr(n) for n in range(a, last + step, step)]


def expand(word: str) -> list[str]:
    """The words ``word`` expands to, in bash's order; itself when it holds no group (or is
    longer than ``MAX_CHARS``); the first ``MAX_WORDS`` when it expands to more."""
    if "{" not in word or "}" not in word or len(word) > MAX_CHARS:
        return [word]
    out: list[str] = []
    todo = [word]  # a stack: depth first keeps bash's order
    steps = scanned = 0
    while todo and len(out) < MAX_WORDS and steps < 8 * MAX_WORDS:
        steps += 1
        w = todo.pop()
        scanned += len(w)
        if scanned > MAX_SCANNED:  # `{,}` × 1,365: 256 rescans of 4 KB made no word
            return out or [word]
        found = _group(w) if len(w) <= MAX_CHARS else None
        if found is None:
            out.append(w)
            continue
        start, end, alts = found
        todo.extend(w[:start] + a + w[end + 1 :] for a in reversed(alts[:MAX_WORDS]))
    return out
