"""A YAML block scalar under a secret's name, for ``rules.redact_triggers``: ``password: |`` (or
``>-``, ``|+`` …) gives the value on the lines below, each indented deeper than the name's line
(Helm values, Ansible vars, a private key kept in a config). The lines go as one; the indicator
stays, and so does a block with no line, a placeholder or a reference (``${GITHUB_TOKEN}``).
Linear: the block's lines are read once, and the scan goes on after them."""

from __future__ import annotations

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
