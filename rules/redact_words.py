"""The words of a command line and the values its options take, for the readers of passwords
given on a command line (``rules.redact_flags``): each word read once, a quoted value to its
closing quote (512 characters at most)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

# A word after blanks or a continued line: quoted parts (closed on the line, within 512
# characters: an unclosed quote is a character of the word) may hold blanks, | ; and &.
_NEXT_WORD = re.compile(
    r"""(?:[ \t]|\\\r?\n)++(?P<word>(?:[^\s\\'"]|\\(?!\r?\n)|'[^'\r\n]{0,512}'"""
    r"""|"[^"\r\n]{0,512}"|['"])++)"""
)
_CLOSING = {"'": re.compile(r"[^'\r\n]{0,512}'"), '"': re.compile(r'[^"\r\n]{0,512}"')}
_BARE_END = re.compile(r"""["'\\]""")
Span = tuple[int, int]
Reader = Callable[[str, list[Span]], Iterator[Span]]


def command_words(text: str, pos: int, until: int | None = None) -> Iterator[Span]:
    """(start, end) of each word of the command whose name ends at ``pos``, to a word that starts
    with ``|``, ``;`` or ``&`` or after one that ends with one (which is left out of it), or to
    one that starts at ``until`` or later."""
    while (m := _NEXT_WORD.match(text, pos)) is not None and text[m.start("word")] not in "|;&":
        if until is not None and m.start("word") >= until:
            return
        start, pos = m.span("word")
        end = pos
        while text[end - 1] in "|;&":
            end -= 1
        yield start, end
        if end < pos:
            return


def word_value(text: str, start: int, end: int) -> Span | None:
    """The value that starts at ``start`` in a word ending at ``end``: inside its quotes (``'…'``,
    ``"…"``, ``\\"…\\"`` in a JSON string), or up to a quote or backslash (the string's end)."""
    escaped = text.startswith('\\"', start)
    quote = '"' if escaped else text[start : start + 1]
    close = _CLOSING[quote].match(text, start + 1 + escaped) if quote in _CLOSING else None
    if close is not None:
        start, end = start + 1 + escaped, close.end() - 1 - escaped
    elif (cut := _BARE_END.search(text, start, end)) is not None:
        end = cut.start()
    return (start, end) if start < end else None


def value_after(text: str, start: int, end: int, sep: str) -> list[Span]:
    """The part after the first ``sep`` of the value at ``start`` (``user:SECRET``,
    ``name=SECRET``, ``user:"SECRET"``)."""
    value = word_value(text, start, end)
    at = -1 if value is None else text.find(sep, *value)
    if value is None or at < 0:
        return []
    rest = (at + 1, value[1]) if at + 1 < value[1] else word_value(text, at + 1, end)
    return [rest] if rest is not None else []


def flag_reader(
    *names: str, prefix: str = "", sep: str = ""
) -> Callable[[str, list[Span]], Iterator[Span]]:
    """A reader of the value after any of ``names`` (the next word): whole, or only after
    ``prefix`` (``openssl -passin pass:SECRET``: ``env:VAR`` and ``file:path`` name no secret)
    or after ``sep`` (``smbclient -U user%SECRET``)."""
    wanted = frozenset(names)
    attached = tuple(f"{name}=" for name in names if name.startswith("--"))

    def read(text: str, words: list[Span]) -> Iterator[Span]:
        for i, (start, end) in enumerate(words):
            word = text[start:end]
            if attached and word.startswith(attached):  # ``--value=SECRET``
                yield from filter(None, [word_value(text, text.index("=", start) + 1, end)])
                continue
            if word not in wanted or i + 1 == len(words):
                continue
            value = word_value(text, *words[i + 1])
            if value is None:
                continue
            if sep:
                yield from value_after(text, *words[i + 1], sep)
            elif not prefix:
                yield value
            elif text.startswith(prefix, value[0]) and value[0] + len(prefix) < value[1]:
                yield value[0] + len(prefix), value[1]

    return read


def command_named(pattern: str, literal: str) -> re.Pattern[str]:
    """Where a command of several words is named (``gh secret set``): ``pattern`` starts with
    ``literal``, the name's first word, found by a fast scan; a word's start, or a line's in a
    JSON string."""
    lit = re.escape(literal)
    return re.compile(
        rf"{lit}(?:(?<![\w\-.]{lit})|(?<=\\[nrt]{lit})){pattern[len(literal) :]}(?![\w\-.])"
    )


def positional_reader(*path: str, at: int) -> Callable[[str, list[Span]], Iterator[Span]]:
    """A reader of the ``at``-th word (from 0) that is no option after the words ``path``, the
    last such word (``rabbitmqctl add_user USER SECRET``: ``positional_reader("add_user", at=1)``):
    more words are no such command line, and reading them would make what a value's redaction
    shifts (a command's name taken for a value) change a second reading."""

    def read(text: str, words: list[Span]) -> Iterator[Span]:
        named = [text[s:e] for s, e in words[: len(path)]]
        if tuple(named) != path:
            return
        args = operands(text, words[len(path) :])
        if len(args) == at + 1:
            yield from filter(None, [word_value(text, *args[at])])

    return read


_REDIRECT = re.compile(r"[0-9]*[<>]")


def operands(text: str, words: list[Span]) -> list[Span]:
    """The words that are no option, up to a redirection (``> out``, ``2>&1``) or an option
    after them (``--api S3v4``: an option's value is no operand)."""
    out: list[Span] = []
    for start, end in words:
        if _REDIRECT.match(text, start, end) or (out and text[start] == "-"):
            break
        if text[start] != "-":
            out.append((start, end))
    return out


def either(*readers: Reader) -> Reader:
    def read(text: str, words: list[Span]) -> Iterator[Span]:
        for reader in readers:
            yield from reader(text, words)

    return read


def named_command(names: str) -> re.Pattern[str]:
    """Where one of ``names`` (a regex alternation) is named: a word's start, or a line's in a
    JSON string (after an escaped ``\\n``)."""
    return re.compile(rf"(?:(?<![\w\-.])|(?<=\\[nrt]))(?:{names})(?![\w\-.])")
