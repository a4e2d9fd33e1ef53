"""A secret's name declared with its value in forms the ``=`` and ``:`` net misses, for
``rules.redact_triggers``: a type between the name and its ``=`` (Rust's ``const API_KEY: &str =
"…"``, ``&'static str``; Go's ``const apiKey string = "…"``), C's ``#define API_TOKEN "…"``, and
make's ``?=``, ``::=`` and ``+=`` (``DB_PASSWORD ?= …``), and a command that sets a name to
its next word (``netlify env:set API_SECRET …``, ``setx API_TOKEN …``). Every pattern is
anchored after the name and bounded, and a name's line is read 64 characters back at most:
linear."""

from __future__ import annotations

import re

from rules.redact_yaml_blocks import line_start

# (its quotes escaped too: a file's text inside a tool call's JSON arguments)
_QUOTED = (
    r"""(?:"(?P<dq>[^"\\\r\n]{1,512}+)"|'(?P<sq>[^'\\\r\n]{1,512}+)'"""
    r"""|\\{1,7}"(?P<edq>[^"\\\r\n]{1,512}+)\\{1,7}"|\\{1,7}'(?P<esq>[^'\\\r\n]{1,512}+)\\{1,7}')"""
)
# A type, then `` = `` and a quoted literal: Rust's reference type (a lifetime, ``mut``, a path,
# generics), or Go's string type after a blank with no colon (a word there is prose's: "the
# password field = …")
_TYPED = re.compile(
    r"""(?:[ \t]*+:[ \t]*+&(?:'[a-z_]{1,16}+[ \t]++)?(?:mut[ \t]++)?[A-Za-z_][\w:]{0,63}+"""
    r"""(?:<[^>\r\n]{0,64}+>)?|[ \t]++(?:string|String|\[\]byte))[ \t]*+=(?!=)[ \t]*+"""
    + _QUOTED
)
_DEFINE_LEAD = re.compile(r"[ \t]*+#[ \t]*+define[ \t]++")
_DEFINED = re.compile(
    r"[ \t]++(?:" + _QUOTED + r"|(?P<bare>[^\s\"'/\\]{1,512}+))[ \t]*+(?=//|/\*|$|\\[rn])", re.M
)
# make's assignments that ``=`` is no part of on its own
_MAKE = re.compile(
    r"""[ \t]*+(?P<op>\?=|:{2,3}=|\+=)[ \t]*+(?:""" + _QUOTED + r"""|(?P<bare>[^\s"'#]{1,512}+))"""
)
_MAKE_LEAD = re.compile(r"[ \t]*+(?:(?:export|override)[ \t]++)?")
# A command that sets a variable or a secret by its name and value as two words (``netlify
# env:set NAME VALUE``, ``doppler secrets set NAME VALUE``, Windows' ``setx NAME VALUE``)
_SET_LEAD = re.compile(
    r"(?:(?<![\w\-.])setx|env:set|(?<![\w\-.])(?:secrets?|env|config)[ \t]++set)[ \t]++\Z"
)
# (not an option, a redirection or a pipe: ``gh secret set NAME --body …``, ``… < file``)
_SET_VALUE = re.compile(
    r"[ \t]++(?:" + _QUOTED + r"|(?P<bare>[^\s\"'\\\-<>|;&][^\s\"'\\]{0,511}+))"
)


def _line_lead(text: str, name_at: int) -> tuple[int, int] | None:
    """Where the line holding the name at ``name_at`` starts (after a line break, or an escaped
    one in a JSON text), and the name; None when the name is more than 64 characters from it."""
    start = line_start(text, name_at)
    return None if start is None else (start, name_at)


def declared_value(text: str, name_at: int, end: int) -> re.Match[str] | None:
    """The value declared for the secret name ``text[name_at:end]`` in one of the forms above:
    its ``dq``, ``sq`` or ``bare`` group; None when there is none."""
    m = _TYPED.match(text, end)
    if m is not None:
        return m
    lead = _line_lead(text, name_at)
    if lead is None:
        return None
    if _SET_LEAD.search(text, *lead) is not None:
        return _SET_VALUE.match(text, end)
    define = _DEFINE_LEAD.match(text, *lead)
    if define is not None and define.end() == name_at:
        return _DEFINED.match(text, end)
    make = _MAKE.match(text, end)
    plain = _MAKE_LEAD.match(text, *lead)
    if make is None or plain is None or plain.end() != name_at:
        return None
    # ``+=`` appends in code too (``password += c``): a make variable's name is in capitals
    return make if make["op"] != "+=" or text[name_at:end].isupper() else None
