"""Where a user's message quotes rather than asks: fenced code blocks (``` and ~~~, to their
closing fence or the end), quoted lines (``>``) and quotations within a line (`the runbook says:
"stop the container you started"`). A pasted log saying "delete it" or "the file I just
created" is not the user's request, so no mention is looked for there; the text stays as it is
for what the words around a mention say. One pass over the lines; linear.
"""

from __future__ import annotations

_FENCES = ("```", "~~~")
MAX_INDENT = 3  # a fence indented more is a fence's text, as Markdown reads it
# a quotation's marks, opening -> closing
_MARKS = {'"': '"', "\u201c": "\u201d", "\u00ab": "\u00bb", "\u201e": "\u201c", "\u300c": "\u300d",
          "\u300e": "\u300f"}  # fmt: skip
MIN_QUOTED_WORDS = 3  # fewer is a name in quotes ("feat/x", "the notes"), not something said
MIN_QUOTED_CHARS = 6  # in a script written without spaces (「さっき作ったフォルダを消して」)


def quoted_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each fenced block and quoted line of ``text``, in order."""
    marks = [m for m in _MARKS if m in text]
    if not marks and "```" not in text and "~~~" not in text and ">" not in text:
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
        elif marks:
            spans.extend(_quotations(line, pos, marks))
        pos = end + 1
    if fence:  # never closed: to the end
        spans.append((opened, len(text)))
    return spans


def _quotations(line: str, pos: int, marks: list[str]) -> list[tuple[int, int]]:
    """The quotations within ``line`` (which starts at ``pos``): each opening mark to its
    closing one. Each mark's next place is looked for again only once passed, and a mark whose
    closing one is not found has none further on either, so it is dropped: linear."""
    found: list[tuple[int, int]] = []
    ahead = {m: i for m in marks if (i := line.find(m)) >= 0}  # each mark's next place
    at = 0
    while ahead:
        start, mark = min((i, m) for m, i in ahead.items())
        end = line.find(_MARKS[mark], start + 1)
        if end < 0:
            del ahead[mark]
            continue
        said = line[start + 1 : end]
        words = len(said.split())
        if words >= MIN_QUOTED_WORDS or (not said.isascii() and len(said) >= MIN_QUOTED_CHARS):
            found.append((pos + start, pos + end + 1))
        at = end + 1
        for m, i in list(ahead.items()):
            if i < at:
                nxt = line.find(m, at)
                if nxt < 0:
                    del ahead[m]
                else:
                    ahead[m] = nxt
    return found
