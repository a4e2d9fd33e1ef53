"""Passwords a server's config or console gives after a blank, with no ``=`` or ``:``, for
``rules.redact``: Redis's ``requirepass SECRET`` and ``masterauth SECRET`` (in redis.conf, a
``CONFIG SET``, a ``redis-server --requirepass``), and ``AUTH [user] SECRET`` typed at a
redis-cli prompt (``127.0.0.1:6379> AUTH …``). The directive must open its line (after blanks or
a comment's ``#``) or follow ``CONFIG SET`` or ``--``: in prose ("set requirepass in the file")
the next word is no password. Linear: each match starts at a literal and its parts are bounded,
and what precedes one is read 64 characters back at most."""

from __future__ import annotations

import re

from rules.redact_references import is_placeholder, names_a_source
from rules.redact_shapes import REDACTED

_VALUE = r"""(?:"(?P<dq>[^"\r\n]{1,256}+)"|'(?P<sq>[^'\r\n]{1,256}+)'|(?P<bare>[^\s"']{1,256}+))"""
_DIRECTIVE = re.compile(rf"(?i:requirepass|masterauth)[ \t]++{_VALUE}")
# AUTH's last word is the password (``AUTH pw``, ``AUTH user pw``), to the line's end
_AUTH = re.compile(rf"> ?(?:AUTH|auth)[ \t]++(?:[^\s\"']{{1,128}}+[ \t]++)?{_VALUE}[ \t]*+$", re.M)
# a redis-cli prompt: ``127.0.0.1:6379>``, ``redis>``, ``host:6379[2]>``
_PROMPT = re.compile(r"[\w.:\-\[\]]{1,64}")
_LOOK_BACK = 64


def redact_directives(text: str) -> str:
    """``text`` with each password given to a Redis directive or a redis-cli ``AUTH`` replaced."""
    low = text.lower()
    if "requirepass" in low or "masterauth" in low:
        text = _DIRECTIVE.sub(lambda m: _redacted(m, _opens_directive(m.string, m.start())), text)
    if "> auth" in low or ">auth" in low:
        text = _AUTH.sub(lambda m: _redacted(m, _after_prompt(m.string, m.start())), text)
    return text


def _line_before(text: str, at: int) -> str:
    """What precedes ``at`` on its line, 64 characters at most (more: no line's start)."""
    begin = max(0, at - _LOOK_BACK)
    newline = text.rfind("\n", begin, at)
    if newline < 0 and begin > 0:
        return text[begin:at] + "\0"  # the line starts further back: no directive's opening
    return text[newline + 1 : at]


def _opens_directive(text: str, at: int) -> bool:
    before = _line_before(text, at)
    if before.endswith("--"):
        return True  # ``redis-server --requirepass …``
    bare = before.strip(" \t#")
    return bare == "" or bare.lower().endswith("config set")


def _after_prompt(text: str, at: int) -> bool:
    return _PROMPT.fullmatch(_line_before(text, at)) is not None


def _redacted(m: re.Match[str], applies: bool) -> str:
    group = next(g for g in ("dq", "sq", "bare") if m[g] is not None)
    value = m[group]
    if not applies or value.startswith(REDACTED) or names_a_source(value, group == "bare"):
        return m[0]
    if is_placeholder(value, group == "bare"):
        return m[0]
    start, end = m.start(group) - m.start(), m.end(group) - m.start()
    return m[0][:start] + REDACTED + m[0][end:]
