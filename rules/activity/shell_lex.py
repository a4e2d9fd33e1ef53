"""A small POSIX-shell lexer for command lines agents run: quoting, escapes, ``$(…)`` and backticks
kept inside words, comments, operators (``&&``, ``||``, ``;``, ``|``, ``&``, newlines, subshell
parentheses), redirections with their targets (fd numbers such as ``2>`` dropped) and heredoc
bodies skipped. It never executes or expands anything; it only splits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rules.text_cache import text_cache

SEPARATORS = frozenset({"&&", "||", ";", ";;", "|", "|&", "&", "\n", "(", ")"})
REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<", "<<", "<<-", "<<<", ">&", "<&", "<>"})
_OPERATORS = sorted(SEPARATORS | REDIRECTS, key=len, reverse=True)
_OP_CHARS = frozenset(";&|<>()\n")
_STRONG = frozenset({"&&", "||", "|", "|&", "&"})
MAX_COMMAND_CHARS = 50_000  # of a command line read for its commands (``split_commands``)
# Runs of characters the lexer takes one by one into the current word, taken at once (a script
# of thousands of characters): none that starts a quote, an escape, an expansion, a comment or
# an operator, nor a blank. ``#`` (a comment only at a word's start) and ``$`` (an expansion
# only before ``(`` or ``{``) end a run, and go into the word on a step of their own.
_PLAIN = re.compile(r"[^\\ \t\r#'\"$`;&|<>()\n]+")
_QUOTED_PLAIN = re.compile(r'[^"\\$]+')  # inside double quotes


@dataclass(frozen=True)
class SimpleCommand:
    """One simple command: its words, its redirections and the operator that preceded it."""

    argv: tuple[str, ...]
    redirects: tuple[tuple[str, str], ...] = ()
    connector: str = ""  # "", "&&", "||", ";", "|", "&", "\n", "(", ")"
    depth: int = 0  # subshell nesting: a ``cd`` inside ( … ) ends with the subshell
    # words whose braces were quoted: the shell does not brace-expand them (a sed or jq script)
    literal: frozenset[str] = frozenset()


@dataclass
class _Lexer:
    text: str
    i: int = 0
    # ("w", word) | ("wl", a word with quoted braces) | ("op", op)
    tokens: list[tuple[str, str]] = field(default_factory=list)
    quoted_brace: bool = False  # the word being read has a brace inside quotes
    pending_heredocs: list[tuple[str, bool]] = field(default_factory=list)

    def run(self) -> list[tuple[str, str]]:
        word: list[str] = []
        in_word = False
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c == "\\" and self.i + 1 < len(text):
                if text[self.i + 1] == "\n":  # line continuation
                    self.i += 2
                    continue
                word.append(text[self.i + 1])
                in_word = True
                self.i += 2
            elif c in " \t\r":
                in_word = self._end_word(word, in_word)
                self.i += 1
            elif c == "#" and not in_word:
                while self.i < len(text) and text[self.i] != "\n":
                    self.i += 1
            elif c == "'":
                end = text.find("'", self.i + 1)
                end = len(text) if end < 0 else end
                word.append(text[self.i + 1 : end])
                self.quoted_brace = self.quoted_brace or "{" in word[-1]
                in_word = True
                self.i = end + 1
            elif c == '"':
                word.append(self._double_quoted())
                self.quoted_brace = self.quoted_brace or "{" in word[-1]
                in_word = True
            elif c == "$" and text[self.i + 1 : self.i + 2] in ("(", "{"):
                word.append(self._balanced(text[self.i + 1]))
                in_word = True
            elif c == "`":
                end = text.find("`", self.i + 1)
                end = len(text) if end < 0 else end
                word.append(text[self.i : end + 1])
                in_word = True
                self.i = end + 1
            elif c in _OP_CHARS:
                # ``2>file``: a word made only of digits right before a redirection is an fd
                if in_word and "".join(word).isdigit() and c in "<>":
                    word.clear()
                    in_word = False
                in_word = self._end_word(word, in_word)
                self._operator()
            else:
                run = _PLAIN.match(text, self.i)
                end = run.end() if run is not None else self.i + 1
                word.append(text[self.i : end])
                in_word = True
                self.i = end
        self._end_word(word, in_word)
        return self.tokens

    def _end_word(self, word: list[str], in_word: bool) -> bool:
        if in_word:
            self.tokens.append(("wl" if self.quoted_brace else "w", "".join(word)))
            word.clear()
        self.quoted_brace = False
        return False

    def _double_quoted(self) -> str:
        out: list[str] = []
        self.i += 1
        text = self.text
        while self.i < len(text) and text[self.i] != '"':
            c = text[self.i]
            if c == "\\" and self.i + 1 < len(text) and text[self.i + 1] in '"\\$`\n':
                out.append(text[self.i + 1])
                self.i += 2
            elif c == "$" and text[self.i + 1 : self.i + 2] == "(":
                out.append(self._balanced("("))
            else:
                run = _QUOTED_PLAIN.match(text, self.i)
                end = run.end() if run is not None else self.i + 1
                out.append(text[self.i : end])
                self.i = end
        self.i += 1
        return "".join(out)

    def _balanced(self, opener: str) -> str:
        """``$(…)`` or ``${…}`` as written (nesting and quotes respected), kept in the word."""
        closer = ")" if opener == "(" else "}"
        start = self.i
        self.i += 2
        depth = 1
        text = self.text
        while self.i < len(text) and depth:
            c = text[self.i]
            if c in "'\"":
                end = text.find(c, self.i + 1)
                self.i = len(text) if end < 0 else end + 1
                continue
            if c == opener:
                depth += 1
            elif c == closer:
                depth -= 1
            self.i += 1
        return text[start : self.i]

    def _operator(self) -> None:
        text = self.text
        for op in _OPERATORS:
            if text.startswith(op, self.i):
                self.i += len(op)
                self.tokens.append(("op", op))
                if op in ("<<", "<<-"):
                    self._heredoc_delimiter(strip_tabs=op == "<<-")
                elif op == "\n" and self.pending_heredocs:
                    self._skip_heredoc_bodies()
                return
        self.i += 1  # a lone character no operator starts with (cannot happen; be safe)

    def _heredoc_delimiter(self, strip_tabs: bool) -> None:
        text = self.text
        while self.i < len(text) and text[self.i] in " \t":
            self.i += 1
        start = self.i
        while self.i < len(text) and text[self.i] not in " \t\n;&|<>()":
            self.i += 1
        raw = text[start : self.i]
        delim = raw.replace("'", "").replace('"', "").replace("\\", "")
        self.tokens.append(("w", delim))
        if delim:
            self.pending_heredocs.append((delim, strip_tabs))

    def _skip_heredoc_bodies(self) -> None:
        text = self.text
        for delim, strip_tabs in self.pending_heredocs:
            while self.i < len(text):
                end = text.find("\n", self.i)
                end = len(text) if end < 0 else end
                line = text[self.i : end]
                self.i = end + 1
                if (line.lstrip("\t") if strip_tabs else line).rstrip() == delim:
                    break
        self.pending_heredocs.clear()
        self.i = min(self.i, len(text))


def tokenize(text: str) -> list[tuple[str, str]]:
    """``[("w", word) | ("wl", word) | ("op", operator)]`` for a command line (``wl``: a word with
    quoted braces, which the shell does not brace-expand); heredoc bodies are left out."""
    return _Lexer(text).run()


def split_uncached(text: str) -> tuple[SimpleCommand, ...]:
    """The simple commands of a command line, in order, each with its redirections."""
    out: list[SimpleCommand] = []
    argv: list[str] = []
    literal: set[str] = set()
    redirects: list[tuple[str, str]] = []
    connector = ""
    depth = 0
    pending_redirect: str | None = None

    def flush(next_connector: str) -> None:
        nonlocal connector
        if argv or redirects:
            out.append(
                SimpleCommand(tuple(argv), tuple(redirects), connector, depth, frozenset(literal))
            )
            argv.clear()
            literal.clear()
            redirects.clear()
            connector = next_connector
        elif next_connector in _STRONG or not connector:
            # no command in between: keep the stronger connector (``a &&\n b``, ``a || (b)``)
            connector = next_connector

    for kind, value in tokenize(text):
        if kind != "op":
            if pending_redirect is not None:
                redirects.append((pending_redirect, value))
                pending_redirect = None
            else:
                argv.append(value)
                if kind == "wl":
                    literal.add(value)
        elif value in REDIRECTS:
            pending_redirect = value
        else:
            flush(value)
            if value == "(":
                depth += 1
            elif value == ")":
                depth = max(0, depth - 1)
    flush("")
    return tuple(out)


# A new shell call's command is split by several readers of the same request (the entities'
# and the workspace map's ``call_effects``, the observations, the map's printed paths): lexed
# once. Immutable (a tuple of frozen commands), so every reader may hold it. A split holds up to
# ~150 bytes a character of its text (a text of one-character commands), charged as it holds
# (``text_cache.charge``, a unit about a byte): the longest line read, 50,000 characters of
# one-character commands, is charged 7.6 M (9.7 MB), a line of `mv a b && …` 2.1 M; the cache
# holds 8 M, so any line read is split once for every rule that reads it, not by each again.
_split_kept = text_cache(max_chars=8_000_000, max_text_chars=MAX_COMMAND_CHARS)(split_uncached)


def split_commands(text: str) -> tuple[SimpleCommand, ...]:
    """``split_uncached``, kept. A command line over ``MAX_COMMAND_CHARS`` is read up to its last
    line or ``;`` within them: the work a call costs is bounded whatever a client sends (a
    million ``; rm x`` took seconds of every reader, on every request of the session), and an
    agent's longer command is a heredoc whose body says nothing."""
    if len(text) > MAX_COMMAND_CHARS:
        head = text[:MAX_COMMAND_CHARS]
        text = head[: max(head.rfind("\n"), head.rfind(";"), 0)]
    return _split_kept(text)


def file_like(word: str) -> bool:
    """Whether a redirection's target can name a file a command made: not a word ending in a
    colon, nor one without a letter or digit. Text that is no shell (SWE-agent's ``edit 4:4``
    body, ``def f(a: float) -> float:``) lexed as a command line gave ``> float:`` and ``> =``."""
    return not word.endswith(":") and any(c.isalnum() for c in word)
