"""Passwords given to an HTTP client in code as a user's and a password's pair, for
``rules.redact``: Python's ``auth=("admin", "SECRET")`` (``session.auth = (…)``, ``"auth": (…)``),
``HTTPBasicAuth(user, "SECRET")`` (``HTTPDigestAuth``, ``HTTPProxyAuth``, httpx's and aiohttp's
``BasicAuth``), Go's ``req.SetBasicAuth("u", "SECRET")``, Rust's ``.basic_auth("u",
Some("SECRET"))``, Java's ``UsernamePasswordCredentials`` and ``PasswordAuthentication``, .NET's
``NetworkCredential``; and ``user:password`` made a Basic credential (``CURLOPT_USERPWD``,
``btoa``, ``b64encode``). No name says secret there: the password is the second argument, and goes
when it is a quoted literal (a variable, ``auth=("admin", password)``, or a placeholder stays).
Linear: each match is anchored at its opening literal and its parts are bounded."""

from __future__ import annotations

import re

from rules.redact_references import is_placeholder, names_a_source
from rules.redact_shapes import REDACTED

# one argument: a quoted literal, or anything with no comma, call or index
_ARG = r"""(?:'[^'\r\n]{1,128}+'|"[^"\\\r\n]{1,128}+"|[^,()\[\]\r\n]{1,128}+)"""
_PAIR = re.compile(
    # a tuple only: a list after ``auth`` is as often roles or scopes (``auth: ["read", "write"]``)
    r"""(?:(?<![\w])(?:auth|AUTH)\\{0,7}["']?[ \t]*+[=:][ \t]*+\("""
    r"|(?:Basic|Digest|Proxy)Auth\(|SetBasicAuth\(|basic_auth\("
    r"|UsernamePasswordCredentials\(|PasswordAuthentication\(|NetworkCredential\("
    # a login's user and password: Python's smtplib, ftplib, imaplib (``.login(user, pw)``),
    # LDAP's bind after its connection (PHP's ``ldap_bind($c, dn, pw)``) or alone
    # (``simple_bind_s(dn, pw)``), MySQL's clients after their host (``pymysql.connect(h, u, pw)``)
    r"|\.login\(|simple_bind(?:_s)?\("
    rf"|(?:ldap_bind|(?:pymysql|MySQLdb)\.connect)\([ \t]*+{_ARG},)"
    # the user: one argument, no call or index in it (a DN quoted, commas and all); then the
    # password, quoted (escaped too, in a JSON string), maybe inside Rust's Some(…)
    rf"[ \t]*+{_ARG},[ \t]*+(?:Some\()?"
    r"""(?P<e>\\{0,7})(?:'(?P<sq>[^'\\\r\n]{1,256}+)(?P=e)'|"(?P<dq>[^"\\\r\n]{1,256}+)(?P=e)")"""
)
# ``user:password`` as one quoted literal given to what makes a Basic credential of it: PHP's
# ``curl_setopt($ch, CURLOPT_USERPWD, 'admin:…')``, JavaScript's ``btoa('admin:…')``, Python's
# ``b64encode(b"admin:…")``, PHP's ``base64_encode``, Ruby's ``encode64``: the password goes
_JOINED = re.compile(
    r"(?:CURLOPT_(?:PROXY)?USERPWD[ \t]*+,|btoa\(|b64encode\(b?|base64_encode\(|encode64\()"
    r"""[ \t]*+(?P<e>\\{0,7})(?:'[^:'\\\r\n]{1,128}+:(?P<sq>[^'\\\r\n]{1,256}+)(?P=e)'"""
    r"""|"[^:"\\\r\n]{1,128}+:(?P<dq>[^"\\\r\n]{1,256}+)(?P=e)")"""
)
# What an encoded literal holds when it is a credential: a user and a password with no blank or
# ``/``, the password holding a digit or a sign; ``b64encode(b"data:image/png")``, ``btoa("a:b")``,
# ``b"http://…"``, ``b"Time: 12:30"`` and ``b"<svg xmlns:xlink=…>"`` encode no credential
_CREDENTIAL = re.compile(r"[^\s:/<>]{1,128}+:[^\s:/]{1,256}+")
_PW_SIGN = re.compile(r"[^A-Za-z]")
# What the patterns' openings hold, looked for before they run (a scan of every position)
_LEADS = ("auth", "AUTH", "Auth(", "Credential(", "Authentication(", ".login(", "bind", ".connect(")
_JOINED_LEADS = ("USERPWD", "btoa(", "b64encode(", "base64_encode(", "encode64(")


def redact_call_credentials(text: str) -> str:
    """``text`` with each password given as a quoted literal beside its user replaced."""
    if any(lead in text for lead in _LEADS):
        text = _PAIR.sub(_redacted, text)
    if any(lead in text for lead in _JOINED_LEADS):
        text = _JOINED.sub(_joined, text)
    return text


def _redacted(m: re.Match[str]) -> str:
    group = "sq" if m["sq"] is not None else "dq"
    value = m[group]
    if value.startswith(REDACTED) or names_a_source(value) or is_placeholder(value, bare=False):
        return m[0]  # redacted already, or a reference to where it is kept
    start, end = m.start(group) - m.start(), m.end(group) - m.start()
    return m[0][:start] + REDACTED + m[0][end:]


def _joined(m: re.Match[str]) -> str:
    """A ``user:password`` literal's password, always after ``CURLOPT_USERPWD`` (a credential
    whatever it holds), else when the literal reads as one (``_CREDENTIAL``)."""
    group = "sq" if m["sq"] is not None else "dq"
    if m[0].startswith("CURLOPT_"):
        return _redacted(m)
    quote = "'" if group == "sq" else '"'
    literal = m[0][m[0].index(quote) + 1 : m.end(group) - m.start()]
    if _CREDENTIAL.fullmatch(literal) is None or _PW_SIGN.search(m[group]) is None:
        return m[0]
    return _redacted(m)
