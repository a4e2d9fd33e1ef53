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


# PowerShell's ``ConvertTo-SecureString 'SECRET' -AsPlainText`` (or ``-String 'SECRET'``): the
# plain text a secure string is made of
_SECURE_STRING = re.compile(
    r"(?i:ConvertTo-SecureString)[ \t]++(?:(?i:-String)[ \t]++)?"
    r"(?:'(?P<sq>[^'\s][^'\r\n]{0,511})'|\"(?P<dq>[^\"\s][^\"\r\n]{0,511})\")"
)


def redact_secure_strings(text: str) -> str:
    """``text`` with the plain text of each ``ConvertTo-SecureString`` replaced (a variable's
    name, ``$pw``, is no secret and stays)."""
    if "SecureString" not in text and "securestring" not in text.lower():
        return text
    return _SECURE_STRING.sub(_secure_redacted, text)


def _secure_redacted(m: re.Match[str]) -> str:
    group = "sq" if m["sq"] is not None else "dq"
    value = m[group]
    if value.startswith("$") or value == REDACTED:
        return m[0]
    start, end = m.span(group)
    return m[0][: start - m.start()] + REDACTED + m[0][end - m.start() :]
