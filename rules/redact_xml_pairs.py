"""A secret's name and its value in XML elements side by side, for ``rules.redact``: Hadoop's and
Hive's ``<property><name>fs.s3a.secret.key</name><value>…</value></property>``, Java's properties
``<entry key="password">…</entry>``, .NET's ``<setting name="ApiKey"><value>…</value>``. The
value's text goes when the name asks for a secret (``min_chars``: a password any length, a key
or a token 8 characters or more) and it is no placeholder or reference (``${env.S3_SECRET}``).
Linear: each element is matched from its own ``<``, each part bounded."""

from __future__ import annotations

import re

from rules.redact_names import min_chars
from rules.redact_references import is_placeholder, names_a_source
from rules.redact_shapes import REDACTED

_PAIR = re.compile(
    # ``<name>NAME</name>`` then ``<value>…</value>``
    r"<name>[ \t]{0,8}+(?P<name>[\w.\-]{1,128}+)[ \t]{0,8}+</name>[ \t\r\n]{0,64}+"
    r"<value>(?P<value>[^<>\r\n]{1,1024}+)</value>"
    # ``<entry key="NAME">…</entry>``, ``<setting name="NAME" …><value>…</value>``
    r"|<(?P<tag>[A-Za-z][\w:.\-]{0,31}+)[ \t]++(?:key|name)=(?P<q>[\"'])"
    r"(?P<attr>[\w.\-]{1,128}+)(?P=q)[^<>\r\n]{0,256}+>[ \t\r\n]{0,64}+"
    r"(?:<value>(?P<inner>[^<>\r\n]{1,1024}+)</value>|(?P<text>[^<>\r\n]{1,1024}+)</(?P=tag)>)"
)

# a build's or a framework's property reference (Maven's ``${env.KEYSTORE_PASS}``, Spring's)
_PROPERTY = re.compile(r"\$\{[\w.\-]{1,128}+\}")  # a default after ":" may be the secret


def redact_xml_pairs(text: str) -> str:
    """``text`` with the values its XML elements give a secret's name replaced."""
    if "<" not in text or ("<value>" not in text and "key=" not in text and "name=" not in text):
        return text
    return _PAIR.sub(_redacted, text)


def _redacted(m: re.Match[str]) -> str:
    name = m["name"] or m["attr"]
    group = next(g for g in ("value", "inner", "text") if m[g] is not None)
    value = m[group].strip()
    needed = min_chars(name)
    if needed is None or len(value) < needed or value.startswith(REDACTED):
        return m[0]
    if names_a_source(value) or is_placeholder(value, bare=False) or _PROPERTY.fullmatch(value):
        return m[0]
    start = m.start(group) - m.start() + m[group].index(value)
    return m[0][:start] + REDACTED + m[0][start + len(value) :]
