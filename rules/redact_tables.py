"""A secret's value in a two-column table a tool prints (``vault kv get``, ``vault read``): the
name starting its line, the value the one word after it, under the table's rule; and in a
Markdown table's row, the cell after the one a secret's name ends (``| DB password | … |``)."""

from __future__ import annotations

import re

from rules.redact_prose import LOOKS_SET

_LETTER = re.compile(r"[A-Za-z]")

# A two-column table's row (``vault kv get``, ``vault read``): a secret's name starting its line,
# two blanks or more, and one word to the line's end, holding a digit or a sign, under the
# table's rule (``---    -----``) at most ``_TABLE_REACH`` characters above. Without the rule,
# code aligned in columns would be read so: a Go struct's ``Token     *oauth2.Token``, a SQL
# table's ``password  VARCHAR(255),``.
_TABLE_ROW = re.compile(r"[ \t]{2,64}+(?P<bare>[^\s\"'`]{1,256}+)[ \t]*+(?=\r?\n|\Z)")
_TABLE_RULE = re.compile(r"[ \t]{0,8}-{3,16}[ \t]{2,64}-{3,16}[ \t]*\r?\n")
_TABLE_REACH = 2048
# A Markdown row's next cell after the name's (``| Admin token | `…` |``): one word, maybe in
# backquotes, that holds a letter and a digit or a sign (a field's type, ``string``, stays)
_MD_CELL = re.compile(
    r"[ \t]{0,8}+\|[ \t]{0,64}+`?(?P<bare>[^\s|`\"']{1,256}+)`?[ \t]{0,64}+(?=\|)"
)
_CELL_START = re.compile(r"\|[ \t]{0,8}+`?(?:[\w.\-]{1,32}+[ \t]){0,3}+\Z")


def _under_a_table_rule(text: str, line: int) -> bool:
    """Whether a table's rule (``---    -----``) starts a line within reach above ``line``."""
    lo = max(0, line - _TABLE_REACH)
    at = text.rfind("---", lo, line)
    while at >= 0:
        start = text.rfind("\n", lo, at) + 1 if at > lo else lo
        if _TABLE_RULE.match(text, start) is not None:
            return True
        at = text.rfind("---", lo, start)
    return False


def table_row(text: str, begin: int, end: int, needed: int) -> re.Match[str] | None:
    """The value of the row whose secret name spans ``begin``..``end`` (``needed``: its shortest
    value), or None."""
    cell = _markdown_cell(text, begin, end)
    if cell is not None:
        return cell
    at = begin
    while at > 0 and text[at - 1] in " \t" and begin - at < 64:
        at -= 1
    if at and text[at - 1] != "\n":
        return None
    m = _TABLE_ROW.match(text, end)
    if m is not None and not _under_a_table_rule(text, at):
        return None
    if m is None or not LOOKS_SET.search(m["bare"]):
        return None
    return m if needed == 1 or _LETTER.search(m["bare"]) else None


def _markdown_cell(text: str, begin: int, end: int) -> re.Match[str] | None:
    """The next cell's value of a Markdown row whose cell ends with the secret's name at
    ``begin``..``end`` (``| DB password | … |``), or None."""
    if _CELL_START.search(text, max(0, begin - 110), begin) is None:
        return None
    m = _MD_CELL.match(text, end + (text[end : end + 1] == "`"))
    if m is None or not _LETTER.search(m["bare"]) or not LOOKS_SET.search(m["bare"]):
        return None
    return m
