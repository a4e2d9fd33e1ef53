"""Secrets said in words rather than assigned, for ``rules.redact``: "the redis password is
hunter2", "my API key is ab12…", "the password for admin is …", "password for root: …", "set
the password to …", and a Dockerfile's ``ENV DB_PASSWORD value``. A value counts only when it
looks set (a digit or a symbol), so "the password is too short" and "the token is expired"
stay; it runs to the blank after it ("S3cret!x." is all secret but the full stop). Set "to" a
value, the value is one only when it is no place nor name ("to config_prod.yaml" is where)."""

from __future__ import annotations

import re

from rules.redact_idents import CJK

# After a secret's name, maybe what it is for ("the password for admin", "… of the db user"):
# ``is``/``was`` or a colon, then the next word (maybe quoted); in CJK text a copula (是, は) or a
# full-width colon, the word ending where the CJK text goes on ("API key 是 ab12…，请保密").
# Or set to it: "change the admin password to S3cret!x" (a value still has to look set).
_SAID = re.compile(
    r"""(?:(?:[ \t]++(?:for|of|on|to)[ \t]++(?:the[ \t]++)?[\w.@\-]{1,64}"""
    r"""(?:[ \t]++(?:user|account|database|db|server|host|admin))?)?+"""
    r"""(?:[ \t]++(?:is|was)[ \t]++|[:：][ \t]*+|[ \t]*+(?:是|为|為|は)[ \t]*+)"""
    r"""|(?P<to>[ \t]++to[ \t]++))"""
    rf"""[`"']?(?P<bare>[^\s"'`,;\\{CJK}]{{4,128}}?)[`"']?"""
    # its end: a blank, the text's, CJK text, or a ``\`` ending the line (Markdown's hard break)
    rf"""(?=[.,;)]*+(?:\s|$|[{CJK}]|\\\r?\n))"""
)
# A Dockerfile's ``ENV NAME value`` (the form without ``=``), fish's ``set -x NAME value`` (``-gx``,
# ``-Ux``, ``--export``) and csh's ``setenv NAME value``: the rest of the line is the value.
_ENV_LINE = re.compile(
    r"(?:^|[\r\n;&|(]|\\n)[ \t]*+(?:ENV|setenv|set(?:[ \t]++-{1,2}[a-zA-Z]{1,10}+)++)[ \t]++\Z"
)
_ENV_REACH = 48  # characters before the name read for those words
_ENV_VALUE = re.compile(r"[ \t]++(?P<bare>[^\s=\\][^\r\n\\]{0,255})")


def env_value(text: str, start: int, end: int) -> re.Match[str] | None:
    """The value of ``ENV NAME value`` (``set -x``, ``setenv``) named ``text[start:end]``."""
    if _ENV_LINE.search(text, max(0, start - _ENV_REACH), start) is None:
        return None
    return _ENV_VALUE.match(text, end)


LOOKS_SET = re.compile(r"[0-9!@#$%^&*_+=~]")
# After "to", where a secret goes or what it becomes, not its value: a file, a path, a call, a
# name of words joined by "_" ("add the API key to settings_local.py", "rename it to DB_PW_V2")
_PLACE = re.compile(r"[./\\()\[\]{}<>:_]")
_LETTER = re.compile(r"[A-Za-z]")
# "API key", "access key" (two words, as said in prose or a console's label) before a bare "key".
_SPACED_KEY = re.compile(r"(?i:\b(?:api|access|auth|client|app)[ \t])\Z")


def spaced_key(text: str, start: int) -> bool:
    """Whether the bare ``key`` at ``start`` is the second word of "API key", "access key"…"""
    return _SPACED_KEY.search(text, max(0, start - 8), start) is not None


def said_value(text: str, end: int, needed: int) -> tuple[int, int, int] | None:
    """(start, end, where the scan goes on) of a value said after the name ending at ``end``;
    ``needed``: the name's shortest value (1: a password, any word that looks set; more: a key
    or token, which also holds a letter)."""
    said = _SAID.match(text, end)
    if said is None:
        return _next_word(text, end) if needed == 1 else None
    value = said["bare"]
    if "[REDACTED]" in value:  # "password is DB_PASS=[REDACTED]": said, and redacted already
        return None
    if not LOOKS_SET.search(value.rstrip("!?")):  # "the password is incorrect!": no value
        return None
    if said["to"] and _PLACE.search(value):  # "move the password to config_prod.yaml"
        return None
    if needed > 1 and (len(value) < needed or not _LETTER.search(value)):
        return None
    return said.start("bare"), said.end("bare"), said.end()


# A password said as the very next word, with no "is" ("the db password hunter2 works", "use
# password Tr0ub4dor&3"): a word of 6 or more that holds a letter and a digit or a symbol (or
# six digits and more) and is no place nor name of words joined by "_" ("password policy",
# "password sha256sum.txt" stay)
_NEXT = re.compile(r"""[ \t]++(?P<bare>[^\s"'`,;\\]{6,128}?)(?=[.,;)!?]*+(?:\s|$))""")


def _next_word(text: str, end: int) -> tuple[int, int, int] | None:
    m = _NEXT.match(text, end)
    if m is None:
        return None
    value = m["bare"]
    if "[REDACTED]" in value or _PLACE.search(value) or not LOOKS_SET.search(value):
        return None
    if not (_LETTER.search(value) or value.isdigit()):  # "password 123456" is one too
        return None
    return m.start("bare"), m.end("bare"), m.end()
