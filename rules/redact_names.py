"""Which names say secret, for ``rules.redact``: a field's (``api_key``, ``clientSecret``: its
value goes whatever it is) and an identifier's before a value (``PGPASSWORD=…``, ``AWS_SECRET_
ACCESS_KEY:``), with how long that value must be to be taken for one."""

from __future__ import annotations

import functools
import re

# Names: split into lowercase words (snake, kebab, dotted and camelCase alike).
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")
# Anywhere in the name.
_SECRET_WORDS = frozenset(
    {
        "authorization",
        "secret",
        "secrets",
        "password",
        "passwd",
        "passphrase",
        "credential",
        "credentials",
        "apikey",
        "cookie",
    }
)
# Only as the name's last word (``api_key``, ``access_token``; not ``key_points``).
_SECRET_LAST = frozenset({"key", "token"})
# ``…_key`` names that are identifiers, not secrets.
_KEY_NOT_SECRET = frozenset(
    {"cache", "idempotency", "primary", "sort", "partition", "foreign", "parameter"}
)
_PASSWORD_ENDS = ("password", "passwd", "passphrase")
_SECRET_ENDS = ("secret", "token", "apikey", "credential", "credentials")
MIN_SECRET_CHARS = 8  # a value assigned to a key or token name; passwords have no minimum


def name_words(name: str) -> list[str]:
    return [w for w in _WORD_SPLIT.split(_CAMEL.sub("_", name).lower()) if w]


def is_secret_name(name: str) -> bool:
    """Whether a field named ``name`` holds a secret (``api_key``, ``clientSecret`` …)."""
    if len(name) <= 64:  # field names repeat in every body: remembered, within a bound
        return _secret_name_memo(name)
    return _is_secret_name(name)


def _is_secret_name(name: str) -> bool:
    words = name_words(name)
    if not words:
        return False
    if any(w in _SECRET_WORDS for w in words):
        return True
    if words[-1] in _SECRET_LAST:
        return not (words[-1] == "key" and len(words) > 1 and words[-2] in _KEY_NOT_SECRET)
    if words[-2:] == ["key", "data"]:  # a kubeconfig's client-key-data (a private key)
        return True
    # npm's ``_auth`` (``//registry.example.com/:_auth``): base64 of a user and password
    return words[-1] == "auth" and name.endswith("_auth") and name[-6:-5] in ("", ":", "/")


_secret_name_memo = functools.lru_cache(maxsize=8192)(_is_secret_name)


def min_chars(name: str) -> int | None:
    """``_min_chars``, remembered for names of 64 characters at most (a text dense in trigger
    words asks about the same few names thousands of times)."""
    return _min_chars_memo(name) if len(name) <= 64 else _min_chars(name)


def _min_chars(name: str) -> int | None:
    """How long a value assigned to ``name`` must be to be redacted; None: not a secret name.
    A bare ``key`` is code (``sorted(x, key=…)``), not a secret; ``DB_PASS`` is one, and so is
    ``MYSQL_PWD`` (a bare ``PWD`` is a folder)."""
    words = name_words(name)
    last = words[-1] if words else ""
    if last.endswith(_PASSWORD_ENDS) or (last == "pass" and len(words) > 1):
        return 1
    if (last == "pwd" and len(words) > 1) or name == "SSHPASS":  # MYSQL_PWD, DB_PWD, dbPwd;
        return 1  # ``sshpass -e`` reads SSHPASS
    if words == ["key"]:
        return None
    if last.endswith(_SECRET_ENDS) or is_secret_name(name):
        return MIN_SECRET_CHARS
    return None


_min_chars_memo = functools.lru_cache(maxsize=8192)(_min_chars)
