"""Secrets marked by where they stand rather than by their own shape, for ``rules.redact``:
private key blocks (``-----BEGIN … PRIVATE KEY-----`` to its END, OpenVPN's static keys too; a
PuTTY key's private lines and MAC; OpenVPN's inline ``<auth-user-pass>``) and credentials in URLs
(``postgres://user:[REDACTED]@host``, a token as a URL's user). Linear, as ``rules.redact``
requires of every pattern."""

from __future__ import annotations

import re

from rules.redact_shapes import REDACTED

# Private key blocks: from BEGIN to its END, or to the end of the text when the END is missing
# (a truncated key is still a key). Found with two scans, not ``BEGIN.*?END``: that one rescans to
# the end of the text from every BEGIN that has no END (2.6 s on 117 KiB of BEGIN markers).
# OpenVPN's static keys (``--tls-auth``, ``--tls-crypt``, ``--secret``): shared secrets so marked
_KEY_KINDS = (
    r"(?:[A-Z0-9 ]{0,64}PRIVATE KEY(?: BLOCK)?"
    r"|OpenVPN (?:Static key V[12]|tls-crypt-v2 \w{1,16} key))"
)
_KEY_BEGIN = re.compile(rf"-----BEGIN {_KEY_KINDS}-----")
_KEY_END = re.compile(rf"-----END {_KEY_KINDS}-----")
# OpenVPN's inline ``<auth-user-pass>`` (a user's line, then its password's): the lines go
_VPN_LOGIN = re.compile(r"<auth-user-pass>(?P<body>[^<]{1,1024}+)</auth-user-pass>")
# PuTTY's key file (.ppk): its private lines, and the MAC over them
_PPK_PRIVATE = re.compile(
    r"Private-Lines:[ \t]*+[0-9]{1,5}(?:\r?\n|\\r?\\n)(?:[A-Za-z0-9+/=]++(?:\r?\n|\\r?\\n|\Z))++"
    r"|Private-(?:MAC|Hash):[ \t]*+[0-9a-fA-F]{16,128}+(?![\w-])"
)

# Credentials in URLs: the password goes (to the authority's last "@": an unencoded "@", "#" or
# "?" in it is common). Linear: neither part can cross a "/" (but for the password's one run after
# a "/", 256 characters at most), so the scan from one ``://`` stops at the next.
# A URL in JSON may have its slashes escaped (``https:\/\/u:pw@host``: PHP's json_encode, Java's).
# (a user already redacted, a key id given as the user, ``s3://AKIA…:…@bucket``, keeps its password)
# A password holding an unencoded "/" (``https://bob:p4ss/w0rd@host``) runs to the "@" after it;
# not after a port (``https://host:443/@scope/pkg`` is a path), nor across an "@" that a host's
# dotted name and its "/" or ":", or a name and its port follow (``https://u:pw@host.com/a/@b``,
# ``https://u:pw@localhost:80/a/@b``: the password is ``pw``).
_URL_CREDENTIALS = re.compile(
    r"(?P<sep>://|:\\/\\/)(?:\[REDACTED\]|[^\s:/?#@'\"<>\[\]]*):(?P<pw>"
    r"(?![0-9]*+/)(?:[^\s/'\"<>@]|@(?![\w-]++(?:\.[\w-]++)++[:/]|[\w-]++:[0-9]))*+/"
    r"(?:(?!://)[^\s'\"<>@]){0,255}+(?=@)|[^\s/'\"<>]+(?=@))@"
)
# A token given as a URL's user, with no password (``https://<40 hex>@github.com``, as git
# accepts one): 32+ hex, or 40+ characters of a token's alphabet.
_URL_USER_TOKEN = re.compile(
    r"(?P<sep>://|:\\/\\/)(?P<user>[0-9a-fA-F]{32,256}|[A-Za-z0-9_\-]{40,256})@"
)


def redact_private_keys(text: str) -> str:
    """``text`` with each private key block replaced, from its BEGIN to its END (or the text's
    end)."""
    if "Private-" in text:
        text = _PPK_PRIVATE.sub(REDACTED, text)
    if "<auth-user-pass>" in text:
        text = _VPN_LOGIN.sub(_vpn_login, text)
    if "PRIVATE KEY" not in text and "OpenVPN" not in text:
        return text
    out: list[str] = []
    pos = 0
    while (begin := _KEY_BEGIN.search(text, pos)) is not None:
        out += [text[pos : begin.start()], REDACTED]
        end = _KEY_END.search(text, begin.end())
        pos = len(text) if end is None else end.end()
    out.append(text[pos:])
    return "".join(out)


def _vpn_login(m: re.Match[str]) -> str:
    body = m["body"]
    if body.strip() in ("", REDACTED):
        return m[0]
    lead = body[: len(body) - len(body.lstrip())]  # the line break after the tag, kept
    tail = body[len(body.rstrip()) :]
    return f"<auth-user-pass>{lead}{REDACTED}{tail}</auth-user-pass>"


def _redact_url_password(m: re.Match[str]) -> str:
    if m["pw"] == REDACTED:
        return m[0]
    return m[0][: m.start("pw") - m.start()] + REDACTED + "@"


def redact_url_credentials(text: str) -> str:
    """``text`` with the passwords in its URLs replaced, and a token given as a URL's user."""
    if "://" not in text and ":\\/\\/" not in text:
        return text
    text = _URL_CREDENTIALS.sub(_redact_url_password, text)
    return _URL_USER_TOKEN.sub(lambda m: f"{m['sep']}{REDACTED}@", text)
