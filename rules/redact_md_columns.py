"""A secret in a Markdown table's column named as one, for ``rules.redact``: an answer's summary
of what it set up (``| Service | User | Password |``, then ``|---|---|---|``, then
``| Postgres | app | … |``) gives each row's password in that column, where no name stands
beside it. A cell goes when it is one word with a letter and a digit or a sign, as long as its
column's name asks (``min_chars``: 8 for a token or a key), and no placeholder, mask or reference
(``<your-token>``, ``****``, ``$DB_PASSWORD``); a column of types (``string``), yes/no flags or
counts stays. Linear: each line is read once, a row of 2,048 characters at most."""

from __future__ import annotations

import re

from rules.redact_names import min_chars
from rules.redact_prose import LOOKS_SET
from rules.redact_references import is_placeholder, names_a_source
from rules.redact_shapes import REDACTED

# A header's rule: cells of dashes (``|---|:--:|``), after the header's line
_RULE = re.compile(r"(?m)^[ \t]{0,8}\|?[ \t]{0,8}:?-{3,64}:?[ \t]{0,8}\|[ \t:\-|]{0,1024}$")
_ROW_MAX = 2048
_WORD = re.compile(r"`?(?P<v>[^\s|`\"']{1,256})`?")
_LETTER = re.compile(r"[A-Za-z]")


def redact_secret_columns(text: str) -> str:
    """``text`` with the cells of its Markdown tables' secret-named columns redacted."""
    if "|" not in text or "---" not in text:
        return text
    pieces: list[str] = []
    last = pos = 0
    while (rule := _RULE.search(text, pos)) is not None:
        pos = rule.end()
        header_end = rule.start() - 1
        header = text[text.rfind("\n", 0, max(header_end, 0)) + 1 : max(header_end, 0)]
        columns = _secret_columns(header)
        if not columns:
            continue
        at = rule.end() + 1
        while at < len(text):
            end = text.find("\n", at, at + _ROW_MAX + 1)
            end = len(text) if end < 0 and len(text) - at <= _ROW_MAX else end
            if end < 0 or "|" not in text[at : at + 9]:
                break
            for start, stop in _secret_cells(text, at, end, columns):
                if start >= last:
                    pieces += [text[last:start], REDACTED]
                    last = stop
            at = end + 1
        pos = max(pos, at)
    return "".join([*pieces, text[last:]]) if pieces else text


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") else inner
    return inner.split("|")


def _secret_columns(header: str) -> dict[int, int]:
    """The header's columns named as a secret: their index, and the least a value's length."""
    if "|" not in header or len(header) > _ROW_MAX:
        return {}
    found = {}
    for i, cell in enumerate(_cells(header)):
        needed = min_chars(cell.strip().strip("`*_ "))
        if needed is not None:
            found[i] = max(needed, 4)
    return found


def _secret_cells(text: str, at: int, end: int, columns: dict[int, int]) -> list[tuple[int, int]]:
    """The spans of the row ``text[at:end]``'s cells in ``columns`` that hold a secret."""
    line = text[at:end]
    lead = len(line) - len(line.lstrip())
    offset = at + lead + (1 if line.lstrip().startswith("|") else 0)
    spans = []
    for i, cell in enumerate(_cells(line)):
        needed = columns.get(i)
        word = _WORD.fullmatch(cell.strip()) if needed is not None else None
        if word is not None and needed is not None:
            value = word["v"]
            if (
                len(value) >= needed
                and value != REDACTED
                and _LETTER.search(value)
                and LOOKS_SET.search(value)
                and not names_a_source(value)
                and not is_placeholder(value, bare=True)
            ):
                start = offset + cell.index(value)
                spans.append((start, start + len(value)))
        offset += len(cell) + 1
    return spans
