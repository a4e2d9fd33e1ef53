"""Secrets split by a line continued with ``\\``, for ``rules.redact``: a shell's ``\\`` at a
line's end, the next line going on with no blank (``export KEY=sk-proj-Xq3v\\`` then
``N8pL…``), joins the two parts into one word, and so does one inside a quoted string. Redacted
by its first part alone (a name's value, a ``Bearer`` credential, a key long enough for its
shape), the secret kept its rest on the next line; cut before its shape's length, it was kept
whole. The rest goes too, after a part already redacted or after a key's prefix and first
characters (``CUT_KEY_START``, the mark a cut leaves), to the next blank or quote, through
further continued lines. A line continued after a blank (``docker run … \\``) joins no word,
and a next line that reads as Markdown's text after a hard break (``…[REDACTED]\\`` then
"Restart the server") stays.
Linear: the runs are bounded and each is read once."""

from __future__ import annotations

import re

from rules.redact_shapes import CUT_KEY_START, REDACTED

# the part before the continuation, redacted or a key's start; then each continued line's run
_CONTINUED = re.compile(
    rf"(?P<head>\[REDACTED\]|{CUT_KEY_START})"
    r"(?P<rest>(?:\\\r?\n[^\s\"'`\\]{1,512}+)++)"
)
_RUN = re.compile(r"(?P<sep>\\\r?\n)[^\s\"'`\\]{1,512}+")


def redact_continued(text: str) -> str:
    """``text`` with the rest of each secret continued on the next line replaced, each line's
    part by REDACTED (the continuations stay, so the lines do)."""
    if "\\\n" not in text and "\\\r\n" not in text:
        return text
    return _CONTINUED.sub(_redacted, text)


def _redacted(m: re.Match[str]) -> str:
    out = [REDACTED]  # the head: redacted already, or a cut key's start
    at = m.end()
    for r in _RUN.finditer(m["rest"]):
        word = r[0][len(r["sep"]) :]
        if _prose(word, m.string[at : at + 1] if r.end() == len(m["rest"]) else "\\"):
            return "".join(out) + m["rest"][r.start() :]  # a Markdown hard break: the text stays
        out += [r["sep"], REDACTED]
    return "".join(out)


def _prose(word: str, after: str) -> bool:
    """Whether a continued line's first ``word`` (``after``: the character after it) starts
    Markdown's text after a hard break (a ``\\`` ending a line), not a secret's rest: a rule or
    a list's mark (``---``, ``-``: no letter or digit), or a word of letters before a blank
    ("Restart the server"). A secret's rest holds a digit or a sign, or ends its line."""
    if not any(c.isalnum() for c in word):
        return True
    return after in (" ", "\t") and word.isalpha()
