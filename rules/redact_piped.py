"""Passwords piped into the command that reads them, for ``rules.redact``: ``echo SECRET |
sudo -S …``, ``echo SECRET | docker login -u me --password-stdin``, ``echo "bob:SECRET" |
chpasswd``, ``printf '%s\\n' SECRET | passwd --stdin bob``. The secret is the last word ``echo``
or ``printf`` prints; an echo piped anywhere else stays. Linear: every part is bounded and
anchored at an ``echo`` or a ``printf``."""

from __future__ import annotations

import re

from rules.redact_shapes import REDACTED

_PIPED = re.compile(
    r"(?<![\w\-.])(?:echo|printf)(?P<args>(?:[ \t]++(?:'[^'\r\n]{0,256}'|\"[^\"\r\n]{0,256}\""
    r"|[^\s|;&'\"]{1,256})){1,4}+)[ \t]*+\|[ \t]*+"
    r"(?=sudo[ \t]++(?:-[A-Za-z]*S|--stdin)|chpasswd|passwd[ \t]++--stdin"
    r"|[^\r\n|;&]{0,200}?--password-stdin)"
)
_LAST_WORD = re.compile(
    r"(?:'(?P<sq>[^'\r\n]{1,256})'|\"(?P<dq>[^\"\r\n]{1,256})\"|(?P<bare>\S{1,256}))\Z"
)
_READERS = ("sudo", "chpasswd", "passwd", "password-stdin")
# a variable, a command's output or a CI template (``${{ secrets.PAT }}``): a name, no secret
_REFERENCES = ("$", "`", "{{", "}}")


def redact_piped(text: str) -> str:
    """``text`` with the password each ``echo`` or ``printf`` pipes into a command that reads
    one replaced by REDACTED."""
    if "|" not in text or not any(word in text for word in _READERS):
        return text
    return _PIPED.sub(_redacted, text)


def _redacted(m: re.Match[str]) -> str:
    args = m["args"].rstrip()
    last = _LAST_WORD.search(args)
    if last is None:
        return m[0]
    group = next(g for g in ("sq", "dq", "bare") if last[g] is not None)
    if last[group] == REDACTED or any(mark in args for mark in _REFERENCES):
        return m[0]  # redacted already, or what names a secret kept elsewhere
    start = m.start("args") - m.start() + last.start(group)
    end = m.start("args") - m.start() + last.end(group)
    return m[0][:start] + REDACTED + m[0][end:]
