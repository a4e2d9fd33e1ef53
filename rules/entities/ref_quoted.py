"""Where a user's message quotes rather than asks: fenced code blocks (``` and ~~~, to their
closing fence or the end) and quoted lines (``>``). A pasted log saying "delete it" or "the file
I just created" is not the user's request, so no mention is looked for there; the text stays as
it is for what the words around a mention say. One pass over the lines; linear.
"""

from __future__ import annotations

_FENCES = ("```", "~~~")
MAX_INDENT = 3  # a fence indented more is a fence's text, as Markdown reads it


def quoted_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each fenced block and quoted line of ``text``, in order."""
    if "```" not in text and "~~~" not in text and ">" not in text:
        return []
    spans: list[tuple[int, int]] = []
    fence, opened, pos = "", 0, 0
    for line in text.split("\n"):
        end = pos + len(line)
        body = line.lstrip(" \t")
        if fence:
            if body.startswith(fence):  # its closing fence: at least as long, of its character
                spans.append((opened, end))
                fence = ""
        elif body.startswith(_FENCES) and len(line) - len(body) <= MAX_INDENT:
            fence = body[: len(body) - len(body.lstrip(body[0]))]
            opened = pos
        elif body.startswith(">"):
            spans.append((pos, end))
        pos = end + 1
    if fence:  # never closed: to the end
        spans.append((opened, len(text)))
    return spans
