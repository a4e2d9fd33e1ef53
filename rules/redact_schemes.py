"""The values after an auth scheme's or a header's name, for ``rules.redact_triggers``:
``Authorization: <scheme> <credentials>``, ``Bearer …``, ``Basic …``, a cookie header's
``name=value``, a Docker config's ``"auth": "…"`` and MySQL's ``IDENTIFIED BY '…'``."""

from __future__ import annotations

import re

from rules.redact_idents import name_ending
from rules.redact_names import MIN_SECRET_CHARS, is_basic_credentials
from rules.redact_references import is_placeholder, names_a_source
from rules.redact_shapes import REDACTED

# ``Authorization: <scheme> <credentials>``: the credentials go, to the end of the line or quote.
_AUTH_VALUE = re.compile(
    r"""\\?["']?[ \t]*+[:=][ \t]*+\\?["']?[ \t]*+"""  # possessive: blanks are read once
    r"""(?:(?P<scheme>(?i:basic|bearer|token|digest|negotiate|ntlm|aws4-hmac-sha256))[ \t]++)?"""
    r"""(?P<cred>[^"'\\\r\n]+)"""
)
# After a name ending in cookie: ``name=value; …`` to the end of the line or quote (a
# Set-Cookie's to its first ";"); ``raw_cookie = get_cookie(…)`` is code, not a cookie.
_COOKIE = r"""\\?["']?[ \t]*+[:=][ \t]*+\\?["']?[ \t]*+(?P<cred>[^\s=;,"'\\]{1,256}+=[^"'\\\r\n"""
_COOKIE_VALUE = (re.compile(_COOKIE + "]*)"), re.compile(_COOKIE + ";]*)"))  # Cookie, Set-Cookie
_BEARER_VALUE = re.compile(r"[ \t]++(?P<cred>[A-Za-z0-9._~+/\-]{8,}=*)")
# A token holds a digit, a capital past its first letter or a sign: "Bearer authentication" and
# an OpenAPI scheme's ``scheme: bearer`` before its next line's ``bearerFormat`` hold words
_TOKEN_LIKE = re.compile(r"[0-9A-Z._~+/=\-]")
_BASIC_VALUE = re.compile(r"[ \t]+(?P<cred>[A-Za-z0-9+/]{4,}={0,2})(?![\w+/=])")
# MySQL's ``IDENTIFIED [WITH plugin] BY [PASSWORD] 'secret'``
_IDENTIFIED_BY = re.compile(
    r"""(?i:[ \t]++(?:with[ \t]++\w{1,64}[ \t]++)?by[ \t]++(?:password[ \t]++)?)"""
    r"""'(?P<sq>[^'\\\r\n]{1,256})'"""
)
_AUTH_MEMBER = re.compile(r'[ \t]*+:[ \t]*+"(?P<cred>[A-Za-z0-9+/]{8,1024}={0,2})"')
# The trigger words read as themselves (a header's or a scheme's name, a SQL keyword), not as
# part of an identifier: the identifier's other words are still judged after them.
SCHEME_WORDS = frozenset({"authorization", "bearer", "basic", "cookie", '"auth"', "identified"})


def scheme_value(text: str, start: int, end: int, word: str) -> tuple[int, int, int] | None:
    """After ``text[start:end]``, the scheme word ``word`` (one of ``SCHEME_WORDS``, lowered):
    (start, end) of the credentials that follow it and where the scan goes on, or None."""
    if word == "authorization":
        m = _AUTH_VALUE.match(text, end)
        if m:
            cred = m["cred"].rstrip()
            if cred != REDACTED and len(cred) >= (1 if m["scheme"] else MIN_SECRET_CHARS):
                if not (names_a_source(cred) or is_placeholder(cred, bare=False)):
                    return m.start("cred"), m.start("cred") + len(cred), m.end()
                return m.end(), m.end(), m.end()  # ``Bearer $TOKEN``: the whole value is kept
        return None
    if word in ("bearer", "basic"):
        if start and (text[start - 1].isalnum() or text[start - 1] == "_"):
            return None  # inside a word
        m = (_BEARER_VALUE if word == "bearer" else _BASIC_VALUE).match(text, end)
        if m and (
            _TOKEN_LIKE.search(m["cred"], 1)
            if word == "bearer"
            else is_basic_credentials(m["cred"])
        ):
            return m.start("cred"), m.end("cred"), m.end()
        return None
    if word == "cookie":  # a header's value, or a name=value one (``raw_cookie = f(x)`` is code)
        set_cookie = name_ending(text, start, end).lower().endswith("set-cookie")
        m = _COOKIE_VALUE[set_cookie].match(text, end)
        if m is None or m["cred"].startswith(REDACTED):
            return None  # "the cookie: a small file", a value already redacted
        cred = m["cred"].rstrip()
        return m.start("cred"), m.start("cred") + len(cred), m.start("cred") + len(cred)
    if word == '"auth"':
        m = _AUTH_MEMBER.match(text, end)
        if m is None or not is_basic_credentials(m["cred"]):
            return None
        return m.start("cred"), m.end("cred"), m.end()
    if word == "identified":
        m = _IDENTIFIED_BY.match(text, end)
        return None if m is None else (m.start("sq"), m.end("sq"), m.end())
    return None
