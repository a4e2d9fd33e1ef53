"""Fuzzing the redactor and the pack patterns with text built from adversarial blocks (blank
lines, key markers, ``password=``, ``://``, ``sk-``, hex runs, command names and their password
flags, cookie headers … repeated up to thousands of times): each finishes within a time budget
per example, redaction is idempotent, and a secret placed in such text never survives it."""

from __future__ import annotations

import base64
import re

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rules.redact import REDACTED, redact, redact_text
from tests.rules.packs.test_regex_budget import PACK_PATTERNS
from tests.support.cpu_clock import cpu_timer

# seconds per example of up to 64 KiB: the quadratic patterns took seconds, a linear one takes
# up to 0.15 s on a quiet machine (room for two test workers sharing two cores)
BUDGET = 0.5
MAX_CHARS = 64 * 1024
SLOW = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

BLOCKS = [
    *("\n", "\r\n", " \n", " ", "\t", "a", "0", "f", "-", "=", ":", '"', "'", "\\", "/", "@", "{"),
    *(
        "-----BEGIN PRIVATE KEY-----",
        "-----END PRIVATE KEY-----",
        "-----BEGIN RSA PRIVATE KEY-----\n",
    ),
    *("password=", "password", '"password": "', "PASSWORD: ", "DB_PASS=", "Basic ", "Bearer "),
    *("://", "://a:", "postgres://u:", "sk-", "sk-abcdefgh", "eyJ", "-eyJabcdefgh", "eyJhbGciOi."),
    *("AKIA", "ghp_", "0123456789abcdef", "key ", "api_key=", "token: ", "Authorization: "),
    *("dXNlcjpwYXNz", REDACTED, "<ctxproxy-context>", "Error", "(Current directory: ", "it "),
    *("<password>", "</password>", "<ns:api_key a='1'>", "<", ">", "</"),
    *("= 1 failed", "  1:1  error  ", " [a", "the new file ", "that file", "刚创建的"),
    *("mysql ", "mariadb-dump ", " -p", " -pS3", "curl ", " -u ", " -ku ", "u:p", " -b ", "a=b"),
    *("sshpass ", " -p ", "\\\n", " | ", "; ", "&", "'a b'", '\\"', "Cookie: ", "Set-Cookie: "),
    *("dop_v1_", "AGE-SECRET-KEY-1" + "Q" * 57, "QPZRY9X8", "xapp-1-", "_sk_live_", "AKIA" * 5),
    *("SecretAccessKey | ", "wJalrXUtnFEMI/K7MDENG", "aB3/"),
    *(" password is ", " was ", "x9_", "ghp_Aa1", "gsk_", "\\nmongosh -p ", " pass:", "…"),
    *(" PASSWORD '", " IDENTIFIED BY '", " login u ", ";Pwd=", "%3D", '"auth": "', "key-data: "),
    *("htpasswd -b ", "rabbitmqctl add_user ", "mc alias set ", " <<< ", "123456789:AA", "x" * 33),
    *("pwd=", "DB_PWD=", "PWD=/", ":\\/\\/", "https:\\/\\/u:", "\\u002d", "sk\\u002d", "\\u00"),
    *("set -gx ", "setenv ", "kind: Secret\n", "data:\n", "  k: ", '"data": {', '"k": "v", '),
    *("ConvertTo-SecureString '", "SetEnvironmentVariable('"),
    *("DB_PW=", "dbPw", "passWord: ", "X-Api-Auth: ", "NPM_AUTH=", "aPat=", "_PAT ", "path"),
    *('"apiKey": "', "token='a1' ", "aws configure set aws_secret_access_key "),
]
block = st.one_of(st.sampled_from(BLOCKS), st.text(max_size=12))
noise = st.lists(st.tuples(block, st.integers(1, 3000)), min_size=1, max_size=6).map(
    lambda parts: "".join(b * n for b, n in parts)[:MAX_CHARS]
)
small_noise = st.lists(st.tuples(block, st.integers(1, 4)), max_size=6).map(
    lambda parts: "".join(b * n for b, n in parts)
)
separator = st.sampled_from([" ", "\n", "\t", "\r\n", ", ", "; "])
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
word = st.text(alphabet=ALNUM, min_size=1, max_size=12)
long_word = st.text(alphabet=ALNUM, min_size=20, max_size=40)
key_value = st.text(alphabet=ALNUM, min_size=8, max_size=24)  # a key's value is 8 or more
hex32 = st.text(alphabet="0123456789abcdef", min_size=32, max_size=48)
hex64 = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
bech32 = st.text(alphabet="QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", min_size=58, max_size=58)
aws_secret = st.text(alphabet=ALNUM + "/+", min_size=38, max_size=38).map(lambda s: "aZ" + s)


def _timed(f: object, *args: object) -> tuple[object, float]:
    with cpu_timer() as took:
        out = f(*args)  # type: ignore[operator]
    return out, took.seconds


@SLOW
@given(noise)
def test_redaction_is_fast_and_idempotent(text: str) -> None:
    once, took = _timed(redact_text, text)
    assert took < BUDGET, f"{took:.2f} s on {len(text)} characters"
    assert redact_text(once) == once


@SLOW
@given(st.sampled_from(PACK_PATTERNS), noise)
def test_every_pack_pattern_is_fast(labelled: tuple[str, re.Pattern[str]], text: str) -> None:
    label, pattern = labelled
    with cpu_timer() as took:
        for _ in pattern.finditer(text):
            pass
    assert took.seconds < BUDGET, f"{label}: {took.seconds:.2f} s on {len(text)} characters"


# A secret in its context, and what must not survive redaction (the context with the secret).
def _basic(user_password: tuple[str, str]) -> str:
    return "Basic " + base64.b64encode(":".join(user_password).encode()).decode()


def _same(text: str) -> tuple[str, str]:
    return text, text


secrets = st.one_of(
    word.map(lambda w: _same(f"password={w}")),
    word.map(lambda w: _same(f'"password": "{w}"')),
    word.map(lambda w: _same(f"PGPASSWORD={w}")),
    st.tuples(word, word).map(lambda u: _same(f"postgres://{u[0]}:{u[1]}@")),
    st.tuples(word, word).map(lambda u: _same(f"https://{u[0]}:{u[1]}@")),
    st.tuples(word, word).map(lambda u: (f"Authorization: {_basic(u)}", _basic(u))),
    long_word.map(lambda w: _same(f"AWS_SECRET_ACCESS_KEY={w}")),
    long_word.map(lambda w: _same(f"sk-{w}")),
    long_word.map(lambda w: _same(f"Authorization: Bearer {w}")),
    long_word.map(
        lambda w: (f"-----BEGIN PRIVATE KEY-----\n{w}\n-----END PRIVATE KEY-----", f"\n{w}\n")
    ),
    hex32.map(lambda h: _same(f"API key: {h}")),
    hex32.map(lambda h: _same(f"api_key={h}")),
    word.map(lambda w: (f"mysql -uroot -p{w}x db", f"-p{w}x")),
    word.map(lambda w: (f"curl -u user:{w}x https://x", f"user:{w}x")),
    word.map(lambda w: (f"curl -b 'sid={w}x' https://x", f"sid={w}x")),
    word.map(lambda w: (f"sshpass -p '{w} x' ssh -p 22 host", f"{w} x")),
    word.map(lambda w: (f"> Cookie: sid={w}x; b=1", f"sid={w}x")),  # curl -v
    word.map(lambda w: (f"< Set-Cookie: sid={w}x; Path=/", f"sid={w}x")),
    hex64.map(lambda h: _same(f"dop_v1_{h}")),
    bech32.map(lambda b: _same(f"AGE-SECRET-KEY-1{b}")),
    long_word.map(lambda w: _same(f"build_sk_live_{w}")),
    aws_secret.map(lambda s: (f"AKIAABCDEFGHIJKLMNOP,{s}", s)),
    aws_secret.map(lambda s: (f"||  SecretAccessKey |  {s}  ||", s)),  # --output table
    word.map(lambda w: _same(f"DB_PW={w}")),
    word.map(lambda w: _same(f'"passWord": "{w}"')),
    key_value.map(lambda w: _same(f'"apiKey": "{w}"')),
    word.map(lambda w: _same(f"NPM_AUTH=user:{w}9")),
    word.map(lambda w: (f"aws configure set aws_secret_access_key {w}x", f"key {w}x")),
)


@settings(max_examples=400, deadline=None)
@given(small_noise, separator, secrets, separator, small_noise)
@example("", " ", _same("password=0"), " ", " password is DB_PASS=`0")  # a value said, redacted
@example("ConvertTo-SecureString '", " ", ("curl -b 'sid=0x' https://x", "sid=0x"), " ", "")
def test_a_secret_never_survives(
    before: str, sep1: str, secret: tuple[str, str], sep2: str, after: str
) -> None:
    text = before + sep1 + secret[0] + sep2 + after
    out = redact_text(text)
    assert secret[1] not in out
    assert redact_text(out) == out
    assert redact({"content": text}) == {"content": out}
