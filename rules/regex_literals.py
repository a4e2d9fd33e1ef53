"""The literal strings every match of a regex holds, read from the compiled pattern's own parse
tree on the path every match takes (not inside an optional group, and in every branch of an
alternation): a pattern needs not run over a text that lacks one (one ``in`` test per literal
costs far less than a pattern's scan). Read by the reference prefilter
(``rules.entities.ref_prefilter``) and the diagnostics parser (``rules.activity.diagnostics``).
The literals are as written: a case-blind pattern's caller folds or skips them."""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
from collections.abc import Iterable, Iterator
from typing import Any

# re's own parser and compiler (no public API; sre_parse warns as deprecated): templates read as
# re reads them
_parser: Any = importlib.import_module("re._parser")
_compiler: Any = importlib.import_module("re._compiler")
_sre: Any = importlib.import_module("_sre")
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
# re's compiled code of a pattern: (its code words, groups, group index, group names)
Code = tuple[list[int], int, dict[str, int], tuple[str | None, ...]]
_RECORDS: list[dict[tuple[str, int], Code]] = []  # where ``compile_once`` keeps what it makes


@contextlib.contextmanager
def recording() -> Iterator[dict[tuple[str, int], Code]]:
    """Inside, each pattern ``compile_once`` makes is kept with its code, by (source, flags as
    the pattern holds them): so a compiled lexicon can be kept whole (``lexicon_cache``)."""
    codes: dict[tuple[str, int], Code] = {}
    _RECORDS.append(codes)
    try:
        yield codes
    finally:  # this very dict (``remove`` would take the first equal one: an outer recording)
        _RECORDS[:] = [kept for kept in _RECORDS if kept is not codes]


def parse_tree(pattern: str, flags: int) -> Any:
    """re's parse of a pattern, kept for the next reader of the same pattern (its compilation,
    its literals, then its tail words): parsing a lexicon's long word alternations is most of
    what loading it costs. The tree is shared: readers must not change it."""
    # as re itself reads them: a text pattern is Unicode unless ASCII (a compiled pattern's
    # ``flags`` say so, the flags it was compiled with may not)
    # (plain ints: flags held as re.RegexFlag make re's compiler step through enum operators)
    flags = int(flags)
    return _parse(pattern, flags if flags & re.ASCII.value else flags | re.UNICODE.value)


@functools.lru_cache(maxsize=1)
def _parse(pattern: str, flags: int) -> Any:
    return _parser.parse(pattern, flags)


def compile_once(source: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(source, flags)`` (the same pattern: equal, and as fast) from ``parse_tree``'s
    tree, so that the readers of its literals that follow parse nothing again: a lexicon's start
    parsed each template twice (a third of ``ctxproxy``'s start-up, ~1 s). re's own steps from
    its parse on (``re._compiler.compile``); where they are not what this Python has,
    ``re.compile``."""
    flags = int(flags)
    tree = parse_tree(source, flags)
    try:
        code = _compiler._code(tree, flags)
        state = tree.state
        names: list[str | None] = [None] * state.groups
        for name, index in state.groupdict.items():
            names[index] = name
        compiled = _sre.compile(
            source, flags | state.flags, code, state.groups - 1, state.groupdict, tuple(names)
        )
    except (AttributeError, TypeError):  # another Python's internals
        return re.compile(source, flags)
    for codes in _RECORDS:
        made = (code, state.groups - 1, dict(state.groupdict), tuple(names))
        codes[(source, compiled.flags)] = made
    return compiled  # type: ignore[no-any-return]


def _literals(items: Iterable[Any]) -> set[str]:
    """Runs of literal characters every match of this sequence holds (two characters or more)."""
    out: set[str] = set()
    run: list[str] = []
    for op, av in [*items, (None, None)]:
        name = str(op)
        if name == "LITERAL":
            run.append(chr(av))
            continue
        if len(run) >= 2:
            out.add("".join(run))
        run = []
        if name == "SUBPATTERN":
            out |= _literals(av[3])
        elif name == "ATOMIC_GROUP":
            out |= _literals(av)
        elif name in _REPEATS and av[0] >= 1:
            out |= _literals(av[2])
        elif name == "BRANCH":
            branches = [_literals(b) for b in av[1]]
            out |= set.intersection(*branches) if branches else set()
    return out


def required_literals(regex: re.Pattern[str]) -> tuple[str, ...]:
    """Literal strings every match of ``regex`` holds: ``'s`` in "the lead agent's config"."""
    return tuple(sorted(_literals(parse_tree(regex.pattern, regex.flags))))
