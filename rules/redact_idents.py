"""Names in a text, for ``rules.redact``: where the identifier holding a secret word starts and
ends (``AWS_SECRET_ACCESS_KEY`` for its ``KEY``), which name it is judged by (its last word:
``DB_TOKEN_SECRET`` is one, ``PASSWORD_RESET_TIMEOUT`` assigns no password), whether it opens an
XML element, and a secret name given as a value rather than assigned one: a name field's value
(``- name: DB_PASSWORD`` then ``value: …``) or a setter's first argument (``os.Setenv("DB_PASSWORD",
"…")``). Each search is bounded (64 characters of a name, 200 to a pair's value): linear."""

from __future__ import annotations

import re
import string

# A quoted value: to its closing quote, past the escaped ones (``"Pa\\"ss"`` is one JSON string);
# opened by an escaped quote (JSON inside a string; escaped again, a command's JSON inside JSON:
# up to seven backslashes), to the next escaped one.
QUOTED_VALUE = (
    r""""(?P<dq>(?:[^"\\\r\n]|\\[^\r\n])+)|\\{1,7}"(?P<edq>[^"\\\r\n]+)"""
    r"""|'(?P<sq>(?:[^'\\\r\n]|\\[^\r\n])+)|\\{1,7}'(?P<esq>[^'\\\r\n]+)"""
)
# Where a bare value stops besides a blank or a quote: CJK punctuation and full-width signs
# (``API_KEY=…，请保密``: the sentence goes on after the comma), for the patterns' classes.
CJK_STOP = "\u3000-\u303f\uff01-\uff0f\uff1a-\uff20"
# Chinese, Japanese and Korean text (ideographs, kana, hangul, their punctuation and full-width
# forms), which ends a value said in it (``密码是 S3cret，…``, ``비밀번호는 S3cret입니다``)
CJK = "\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef"
VALUE_GROUPS = ("dq", "edq", "sq", "esq", "bare")

# A secret name given as another field's value (``- name: DB_PASSWORD`` then ``value: …`` in a
# Kubernetes env list, ``{"name": "API_TOKEN", "value": …}``, ``<add key="ApiSecret" value=…``,
# ``ParameterKey=DbPassword,ParameterValue=…``): the name field, right before the name, and the
# value field after it in the same object (200 characters at most, no bracket or list item
# between).
# (a command line's ``--name API_KEY --value …`` too, its words parted by blanks)
_PAIR_NAME = re.compile(
    r"""(?<!\w)(?i:name|key|parameterkey|parametername)\\?["']?[ \t]*+[:=][ \t]*+\\?["']?\Z"""
    r"""|(?<![\w-])--(?:name|key)[ \t]++["']?\Z"""
)


def _pair_value(reach: int, bare: bool = True) -> re.Pattern[str]:
    value = rf"""(?:{QUOTED_VALUE}|(?P<bare>[^\s"',;&\\{{}}<>]+))""" if bare else QUOTED_VALUE
    return re.compile(
        rf"""(?:(?![{{}}<>\[\]]|\n[ \t]*+-[ \t])(?s:.)){{0,{reach}}}?(?<!\w)"""
        r"""(?:(?i:(?:parameter)?value)\\?["']?[ \t]*+[:=]|(?<=-)-value[ \t])[ \t]*+""" + value
    )


_PAIR_VALUE = _pair_value(200)
# ``"keyName": "key1", "permissions": "FULL", "value": "…"``: a quoted value only (code after a
# ``keyName`` variable computes its ``value``: ``const value = compute(keyName)``)
_KEY_NAME_VALUE = _pair_value(100, bare=False)
# A quoted secret name, then its value, as a setter's two arguments (``os.Setenv("DB_PASSWORD",
# "…")``, ``localStorage.setItem('token', '…')``, PHP's ``define('DB_PASSWORD', '…')`` in a
# wp-config.php): the call, right before the name, and the value quoted (a list of names,
# ``["password", "email"]``, is no call).
_SETTER = re.compile(
    r"""(?i:set(?:env|default|item|_?secret|environmentvariable)?|putenv|put|add|store|define)"""
    r"""[ \t]*+\([ \t]*+\\?["']\Z"""
)
_ARGUMENT = re.compile(
    r"""\\?["'][ \t]*+,[ \t]*+(?:\\?"(?P<dq>[^"\\\r\n]{1,512})\\?"|'(?P<sq>[^'\\\r\n]{1,512})')"""
)
_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_-.")
_NAME_RUN = re.compile(r"[A-Za-z0-9_.\-]{0,64}")
# How a name judged whole ends: in one of ``rules.redact``'s trigger words, or SECRET_KEY_BASE.
_NAME_ENDINGS = (
    *("pass", "password", "passwd", "passphrase", "secret", "token", "key", "key-data"),
    *("key_data", "credential", "credentials", "pwd", "key_base", "_salt", "psk"),
)


def name_start(text: str, start: int) -> int:
    """Where the identifier holding ``text[start]`` starts (64 characters back at most)."""
    i, low = start, max(0, start - 64)
    while i > low and text[i - 1] in _NAME_CHARS:
        i -= 1
    return i


def name_ending(text: str, start: int, end: int) -> str:
    """The identifier that ends at ``end``, its last word starting at ``start`` (64 chars at
    most): ``AWS_SECRET_ACCESS_KEY`` for its ``KEY``, ``PGPASSWORD`` for ``PASSWORD``."""
    return text[name_start(text, start) : end]


def name_end(text: str, end: int) -> int:
    """Where the identifier going on at ``end`` ends (64 characters on at most)."""
    return _NAME_RUN.match(text, end).end()  # type: ignore[union-attr]  # matches the empty run


def judged_end(text: str, start: int, end: int) -> int:
    """Where the name a trigger word at ``text[start:end]`` is judged by ends: the whole
    identifier's end when a trigger word ends it too (``DB_TOKEN_SECRET``, ``SECRET_KEY_BASE``),
    else the word's (``PASSWORD_RESET_TIMEOUT`` assigns no password)."""
    whole = name_end(text, end)
    if whole > end and not text[start:whole].lower().endswith(_NAME_ENDINGS):
        return end
    return whole


def paired_value(text: str, start: int, end: int) -> re.Match[str] | None:
    """The value of the secret name ending at ``end`` when the name is itself a value: a name
    field's (``_PAIR_NAME``), or a setter's first argument (``_SETTER``)."""
    i = name_start(text, start)
    if _PAIR_NAME.search(text, max(0, i - 48), i) is not None:
        return _PAIR_VALUE.match(text, end)
    if _SETTER.search(text, max(0, i - 32), i) is not None:
        return _ARGUMENT.match(text, end)
    return None


# A field naming which of an account's keys its object holds (``"keyName": "key1"``, then
# ``"value": …``: ``az storage account keys list``): the value field is the key. The field is a
# quoted key (JSON's, YAML's): a ``keyName`` variable in code is not one.
_KEY_NAME = re.compile(r"""(?i:key_?name)\\?["'][ \t]*+:""")


def key_named_value(text: str, start: int) -> re.Match[str] | None:
    """The value field after a ``keyName`` field starting at ``start``, or None."""
    if start and text[start - 1] in _NAME_CHARS:
        return None  # ``SharedAccessKeyName=`` names a policy
    if not start or text[start - 1] not in "\"'":
        return None
    m = _KEY_NAME.match(text, start)
    return None if m is None else _KEY_NAME_VALUE.match(text, m.end())


def opens_element(text: str, start: int, end: int) -> bool:
    """Whether the name ending at ``end`` is an XML start tag's (``<password``, ``<ns:api_key``)."""
    i, low = start, max(0, start - 64)
    while i > low and (text[i - 1] in _NAME_CHARS or text[i - 1] == ":"):
        i -= 1
    return i > 0 and text[i - 1] == "<"
