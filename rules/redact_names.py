"""Which names say secret, for ``rules.redact``: a field's (``api_key``, ``clientSecret``: its
value goes whatever it is) and an identifier's before a value (``PGPASSWORD=…``, ``AWS_SECRET_
ACCESS_KEY:``), with how long that value must be to be taken for one; and the names that say
secret only of a value of a secret's shape (``NPM_AUTH``, ``GITLAB_PAT``: ``value_fits``)."""

from __future__ import annotations

import base64
import binascii
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
    {"cache", "idempotency", "primary", "sort", "partition", "foreign", "parameter", "has"}
)
# ``…_token`` names that are a text's pieces or a place in a list, not credentials (a tokenizer's
# ``pad_token``, an API's ``next_page_token``, a framework's ``cancellation_token``).
_TOKEN_NOT_SECRET = frozenset(
    {
        *("pad", "eos", "bos", "unk", "mask", "cls", "sep", "special", "start", "end", "stop"),
        *("page", "cancellation", "continuation"),
    }
)
_PASSWORD_ENDS = ("password", "passwd", "passphrase")
# Short forms of password, only as a name's last word after another (a bare ``PWD`` is a folder,
# ``pass`` a loop's statement or a count of passes)
_PASSWORD_LAST = frozenset({"pass", "pwd", "pw"})
# What the words before a short form name when it is a password (``DB_PW``, ``SMTP_PASS``,
# ``dbPw``): a store, a service, an account. Elsewhere it is a pass or a power (``render_pass``,
# ``first_pass``, ``test_pass``, ``max_pw``): a field so named keeps its value.
_LOGIN_WORDS = frozenset(
    {
        *("db", "database", "mysql", "postgres", "postgresql", "pg", "psql", "sql", "mssql"),
        *("oracle", "redis", "mongo", "mongodb", "rabbitmq", "amqp", "smtp", "mail", "email"),
        *("imap", "pop3", "ftp", "sftp", "ssh", "ldap", "admin", "root", "user", "login", "proxy"),
        *("vpn", "wifi", "keystore", "truststore", "key", "cert", "app", "api", "service"),
        *("account", "bind", "sa", "jdbc", "kafka", "elastic", "es", "vault", "registry"),
    }
)
_SECRET_ENDS = ("secret", "token", "apikey", "credential", "credentials")
MIN_SECRET_CHARS = 8  # a value assigned to a key or token name; passwords have no minimum


# Words a camelCase name splits that are one word (``passWord``, ``PassPhrase``).
_JOINED = {("pass", "word"), ("pass", "wd"), ("pass", "phrase")}


def name_words(name: str) -> list[str]:
    words = [w for w in _WORD_SPLIT.split(_CAMEL.sub("_", name).lower()) if w]
    for i in range(len(words) - 1, 0, -1):
        if (words[i - 1], words[i]) in _JOINED:
            words[i - 1 : i + 1] = [words[i - 1] + words[i]]
    return words


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
    if words[-1] in _PASSWORD_LAST and _LOGIN_WORDS.intersection(words[:-1]):
        return True  # DB_PASS, MYSQL_PWD, DB_PW, dbPw (not render_pass, max_pw)
    if words[-1] in _SECRET_LAST:
        unlike = _KEY_NOT_SECRET if words[-1] == "key" else _TOKEN_NOT_SECRET
        return not (len(words) > 1 and words[-2] in unlike)
    if words[-2:] == ["key", "data"]:  # a kubeconfig's client-key-data (a private key)
        return True
    if words[-1] == "psk":  # a Wi-Fi's pre-shared key (wpa_supplicant's ``psk=``, ``wpa_psk``)
        return True
    if words[-1] == "salt" and len(words) > 1 and name.isupper():
        return True  # a config's constant: WordPress's AUTH_SALT, SECURITY_PASSWORD_SALT (code's
        # ``key_salt = "django.contrib.sessions"`` is a namespace)
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
    if last.endswith(_PASSWORD_ENDS) or (last in ("pass", "pwd") and len(words) > 1):
        return 1  # DB_PASS, MYSQL_PWD, dbPwd (a bare PWD is a folder)
    if last == "pw" and _LOGIN_WORDS.intersection(words[:-1]):
        return 1  # DB_PW, SMTP_PW (not max_pw, power_pw)
    if name == "SSHPASS":  # ``sshpass -e`` reads SSHPASS
        return 1
    if (last in _SHAPED and len(words) > 1) or words[-2:] in (_PRIMARY_KEY, _AUTH_IDENT):
        return 1  # the value's shape decides (``value_fits``)
    if words == ["key"] or (last == "token" and len(words) > 1 and words[-2] in _TOKEN_NOT_SECRET):
        return None  # a bare key is code; a pad_token, a next_page_token no credential
    if last.endswith(_SECRET_ENDS) or is_secret_name(name):
        return MIN_SECRET_CHARS
    return None


_min_chars_memo = functools.lru_cache(maxsize=8192)(_min_chars)

# Last words that name a secret only after another word and before a value of a secret's shape
# (and ``primary_key``: ``_PRIMARY_KEY``):
# ``NPM_AUTH``, ``BASIC_AUTH``, ``X-Api-Auth`` (``ENABLE_AUTH=true``, ``DEFAULT_AUTH=oauth2`` and
# ``PAM_AUTH=/etc/pam.d/x`` stay) and a personal access token's ``GITLAB_PAT`` (``FILE_PAT =
# '*.py'``, a pattern, stays).
_SHAPED = frozenset({"auth", "pat"})
# yarn's ``npmAuthIdent``: ``user:password``, or base64 of it, judged as an ``…_auth`` is
_AUTH_IDENT = ["auth", "ident"]
# ``user:password`` whose password holds a digit or a sign (``admin:hunter2``; ``oauth2:openid``,
# a scheme and a scope, stays)
_USER_PASSWORD = re.compile(r"[^\s:/]{1,64}+:(?P<pw>[^\s:/]{1,128}+)")
_PW_SIGN = re.compile(r"[^A-Za-z]")
# a token: 16 or more of a token's characters (a date, a count, an id of 8 digits stays)
_AUTH_TOKEN = re.compile(r"[A-Za-z0-9_\-.+/=]{16,512}+")
# a personal access token: 20 or more (GitHub's are 40, GitLab's 20 and more; a pattern such as
# ``release-v1`` or ``feature-123`` is shorter)
_PAT_VALUE = re.compile(r"[A-Za-z0-9_\-]{20,256}+")
_LETTER = re.compile(r"[A-Za-z]")
_DIGIT = re.compile(r"[0-9]")
# a value read after a ``_SHAPED`` name, at most: one so long is no such secret, and the scan goes
# on inside it (a secret name there is judged in its turn)
SHAPED_REACH = 1024


# A primary key names a table's column (``primary_key: id``) or, in a cloud's listing of an
# account's keys (Azure's ``primaryKey``, ``secondaryKey`` beside it), the key itself: one of a
# key's shape, 40 or more base64 characters with both cases and a digit (a UUID has not both)
_PRIMARY_KEY = ["primary", "key"]
_KEY_VALUE = re.compile(r"[A-Za-z0-9+/=_\-]{40,512}+")
_LOWER = re.compile(r"[a-z]")
_UPPER = re.compile(r"[A-Z]")


def shaped_name(name: str) -> bool:
    """Whether ``name`` says secret only of a value of a secret's shape (``NPM_AUTH``); asked of
    every field name of a state and every trigger word, so remembered (a longer name is none)."""
    return len(name) <= 64 and _shaped_memo(name)


@functools.lru_cache(maxsize=8192)
def _shaped_memo(name: str) -> bool:
    words = name_words(name)
    return len(words) > 1 and (words[-1] in _SHAPED or words[-2:] in (_PRIMARY_KEY, _AUTH_IDENT))


def is_basic_credentials(value: str) -> bool:
    """Whether ``value`` is base64 of ``user:password`` (``Basic …``, a Docker config's ``auth``),
    not a word ("basic auth")."""
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded and decoded.isascii() and decoded.decode().isprintable()


def value_fits(name: str, value: str) -> bool:
    """Whether ``value``, assigned to the secret name ``name``, is taken for a secret: any value
    of most names (their length is ``min_chars``'s), one of a secret's shape after ``_SHAPED``."""
    words = name_words(name) if len(name) <= 64 else []
    last = words[-1] if len(words) > 1 else ""
    if last == "auth" or words[-2:] == _AUTH_IDENT:
        # credentials: user:password, base64 of it, a token of letters and digits
        if is_basic_credentials(value):
            return True
        pair = _USER_PASSWORD.fullmatch(value)
        if pair is not None:
            return _PW_SIGN.search(pair["pw"]) is not None
        return bool(_AUTH_TOKEN.fullmatch(value) and _LETTER.search(value) and _DIGIT.search(value))
    if words[-2:] == _PRIMARY_KEY:
        return bool(
            _KEY_VALUE.fullmatch(value)
            and _LOWER.search(value)
            and _UPPER.search(value)
            and _DIGIT.search(value)
        )
    if last == "pat":  # a token: 20+ of a token's characters, letters and digits
        return bool(_PAT_VALUE.fullmatch(value) and _LETTER.search(value) and _DIGIT.search(value))
    return True


def is_secret_value(name: str, value: object) -> bool:
    """Whether a field named ``name`` holding ``value`` holds a secret: a secret name's whatever
    it is, a ``_SHAPED`` name's when it is a text of a secret's shape."""
    if is_secret_name(name):
        return True
    if not isinstance(value, str):
        return False
    return shaped_name(name) and value_fits(name, value)
