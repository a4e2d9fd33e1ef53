"""A name's whole-word occurrences in a text, found without compiling a pattern for the name:
a pattern compiled per name is kept in ``re``'s own cache, which every principal shares (a name
another tenant's request compiled would be answered faster: ``rules.memo_scope``), and the
compile costs more than the search."""

from __future__ import annotations

from collections.abc import Callable, Iterator


def ascii_part(ch: str) -> bool:
    """A lower-case letter or digit of ASCII: a name's neighbour that makes it part of a word."""
    return "a" <= ch <= "z" or "0" <= ch <= "9"


def word_part(ch: str) -> bool:
    """A word character (``\\w``) or a hyphen."""
    return ch.isalnum() or ch in "_-"


def occurrences(
    text: str, name: str, part: Callable[[str], bool], before: bool = True, after: bool = True
) -> Iterator[tuple[int, int]]:
    """(start, end) of each occurrence of ``name`` in ``text`` with no ``part`` character just
    before it (``before``) and just after it (``after``)."""
    if not name:
        return
    at = text.find(name)
    while at >= 0:
        end = at + len(name)
        if not (before and at and part(text[at - 1])) and not (
            after and end < len(text) and part(text[end])
        ):
            yield at, end
        at = text.find(name, at + 1)


def holds_word(text: str, name: str) -> bool:
    """``name`` in ``text`` as a whole word of ASCII letters and digits ("pr" is not in
    "profile"; "q1" is in "q1.md")."""
    return next(occurrences(text, name, ascii_part), None) is not None
