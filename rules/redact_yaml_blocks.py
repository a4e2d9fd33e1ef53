"""A YAML block scalar under a secret's name, for ``rules.redact_triggers``: ``password: |`` (or
``>-``, ``|+`` …) gives the value on the lines below, each indented deeper than the name's line
(Helm values, Ansible vars, a private key kept in a config). The lines go as one; the indicator
stays, and so does a block with no line, a placeholder or a reference (``${GITHUB_TOKEN}``).
Linear: the block's lines are read once, and the scan goes on after them.

Also a plain or quoted scalar alone on the line below its name (``password:`` ending its line,
then ``  hunter2``; a bare one holding a digit or a sign): ``next_line_value``."""

from __future__ import annotations

import re

from rules.redact_references import is_placeholder, names_a_source
from rules.redact_shapes import REDACTED


def _indent(text: str, start: int, end: int) -> int:
    at = start
    while at < end and text[at] in " \t":
        at += 1
    return at - start


def block_span(text: str, name_at: int, after: int) -> tuple[int, int, int]:
    """(start, end) of the block scalar's lines whose indicator ends at ``after`` (the name's
    line holding ``name_at``), and where the scan goes on; an empty span when it is no secret."""
    line_start = text.rfind("\n", 0, name_at) + 1
    depth = _indent(text, line_start, name_at)
    at = text.find("\n", after)
    first = last = -1
    while at >= 0 and at + 1 < len(text):
        begin = at + 1
        end = text.find("\n", begin)
        stop = len(text) if end < 0 else end
        line_end = stop - (stop > begin and text[stop - 1] == "\r")
        indent = _indent(text, begin, line_end)
        if begin + indent < line_end:  # a line with text: inside the block when deeper
            if indent <= depth:
                break
            first = begin + indent if first < 0 else first
            last = line_end
        at = end
    if first < 0:
        return after, after, after
    value = text[first:last]
    if value.startswith(REDACTED) or names_a_source(value) or is_placeholder(value, bare=False):
        return last, last, last
    return first, last, last


# After a name that ends its line with a colon: one word (or one quoted value) alone on the next
# line. Its first character is none that starts a mapping's or a list's line, a comment, a flow
# collection, an anchor, an alias or a tag. Line breaks may be escaped, and quotes too (a file's
# text inside a tool call's JSON arguments), and the value may end the JSON string.
_NEXT_LINE = re.compile(
    r"""\\?["']?[ \t]*+:[ \t]*+(?:\r?\n|\\r\\n|\\n)(?P<indent>[ \t]{1,64}+)"""
    r"""(?:'(?P<sq>[^'\\\r\n]{1,512}+)'|"(?P<dq>[^"\\\r\n]{1,512}+)"|"""
    r"""\\{1,7}"(?P<edq>[^"\\\r\n]{1,512}+)\\{1,7}"|\\{1,7}'(?P<esq>[^'\\\r\n]{1,512}+)\\{1,7}'"""
    r"""|(?P<bare>[^\s#'"\-{}\[\]|>&*!%@`?,\\][^\s"\\]{0,1023}+))"""
    r"""[ \t]*+(?=\r?\n|\\r\\n|\\n|\Z|\\?")"""
)
_BREAK_AT = re.compile(r"(?:\r?\n|\\r\\n|\\n)++")  # one line break or more (blank lines)
# What a bare value alone on its line holds to be taken for a secret: a digit or a sign
_SET = re.compile(r"[0-9!@#$%^&*_+=~]")
# What may stand before the name on its line: blanks, a list item's dash, a quote
_LINE_LEAD = re.compile(r"""[ \t]*+(?:-[ \t]++)?\\?["']?""")


def next_line_value(text: str, name_at: int, after: int) -> re.Match[str] | None:
    """The value alone on the line below the name ``text[name_at:after]`` that ends its line with
    a colon (a YAML mapping's key), indented deeper than the name, with no deeper line after it
    (lines that go on are a mapping, a list or prose: no one value); None when there is none."""
    start = line_start(text, name_at)
    if start is None:
        return None
    lead = _LINE_LEAD.match(text, start, name_at)
    if lead is None or lead.end() != name_at:
        return None
    m = _NEXT_LINE.match(text, after)
    if m is None or len(m["indent"]) <= _indent(text, start, name_at):
        return None
    if m["bare"] is not None and (m["bare"].endswith(":") or not _SET.search(m["bare"])):
        return None  # a mapping's key; a word (a docstring's type, ``required``)
    breaks = _BREAK_AT.match(text, m.end())
    nxt = m.end() if breaks is None else breaks.end()
    if breaks is not None and _indent(text, nxt, min(len(text), nxt + 64)) >= len(m["indent"]):
        return None  # the value goes on below: several lines, judged no further
    return m


def line_start(text: str, at: int, reach: int = 64) -> int | None:
    """Where the line holding ``at`` starts: after a line break, an escaped one (``\\n`` in a
    JSON text) or the quote that opens a JSON string (its first line); None when that is more
    than ``reach`` characters back."""
    back = max(0, at - reach)
    real, escaped = text.rfind("\n", back, at), text.rfind("\\n", back, at)
    quote = text.rfind('"', back, at)
    if quote > 0 and text[quote - 1] == "\\":
        quote = -1  # an escaped quote: inside the string
    if real < 0 and escaped < 0 and quote < 0:
        return None if at > reach else 0
    return max(real + 1, escaped + 2 if escaped >= 0 else 0, quote + 1)
