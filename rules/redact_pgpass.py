"""A PostgreSQL password file's lines (``hostname:port:database:username:password``), in a text
that names the file (``~/.pgpass``, ``PGPASSFILE``): the password field, for ``rules.redact``.
Elsewhere five colon-separated fields are too common (a log's ``file:line:col:``, a time) to be
read as one."""

from __future__ import annotations

import re

from rules.redact_shapes import REDACTED

_NAMES = ("pgpass", "PGPASSFILE")
# A line's fields, after the start, a blank or a quote (an ``echo '…' >> ~/.pgpass`` too): a host
# (or ``*``), a port (or ``*``), a database and a user, then the password to the field's end.
# Bounded fields: at most a few hundred characters are tried from each start.
_LINE = re.compile(
    r"""(?<![^\s"'])[A-Za-z0-9_.\-*\[\]]{1,253}:(?:[0-9]{1,5}|\*):[^:\s"']{1,63}:[^:\s"']{1,63}:"""
    r"""(?P<pw>[^\s"']{1,256})"""
)


def redact_pgpass(text: str) -> str:
    """``text`` with the passwords of its password-file lines redacted, when it names the file."""
    if not any(name in text for name in _NAMES):
        return text
    return _LINE.sub(_without_password, text)


def _without_password(m: re.Match[str]) -> str:
    if m["pw"] == REDACTED:
        return m[0]
    return m[0][: m.start("pw") - m.start()] + REDACTED
