"""Secret names in the spellings a ``password``/``key``/``token`` net missed: short forms of
password as a name's last word (``DB_PW``, ``SMTP_PASS``), a camelCase ``passWord``, names that
say secret only of a value of a secret's shape (``NPM_AUTH``, ``X-Api-Auth``, ``GITLAB_PAT``),
``aws configure set``'s named value, and a key's or token's value shorter than a real one. With
the lookalikes that must stay (``AUTHOR``, ``PATH``, ``BYPASS_CACHE``, ``ENABLE_AUTH=true``,
``FILE_PAT = '*.py'``, ``token: str``, a logprob's ``"token": "the"``), and a text dense in the
new names redacted in bounded time."""

from __future__ import annotations

import pytest

from proxy.store.redact_state import redact_state
from rules.base import SessionState
from rules.redact import REDACTED, redact, redact_text
from tests.support.cpu_clock import cpu_timer


@pytest.mark.parametrize(
    ("text", "after"),
    [
        # short forms of password, as a name's last word
        ("DB_PW=hunter2x", f"DB_PW={REDACTED}"),
        ("export SMTP_PW='x'", f"export SMTP_PW='{REDACTED}'"),
        ('{"dbPw": "abc"}', f'{{"dbPw": "{REDACTED}"}}'),
        ("SMTP_PASS=hunter2x", f"SMTP_PASS={REDACTED}"),
        # camelCase password
        ('passWord: "x"', f'passWord: "{REDACTED}"'),
        ('{"passWord": "x"}', f'{{"passWord": "{REDACTED}"}}'),
        ("dbPassWord=S3cret", f"dbPassWord={REDACTED}"),
        ("const o = {passPhrase: 'a b c'}", f"const o = {{passPhrase: '{REDACTED}'}}"),
        # names that say secret of a value of a secret's shape
        ("GITLAB_PAT=abc123def456", f"GITLAB_PAT={REDACTED}"),
        ("gitlabPat: glx9y8z7w6v5", f"gitlabPat: {REDACTED}"),
        ("NPM_AUTH=abcdefgh12345", f"NPM_AUTH={REDACTED}"),
        ("BASIC_AUTH=user:pw", f"BASIC_AUTH={REDACTED}"),
        ("PROXY_AUTH=dXNlcjpwYXNz", f"PROXY_AUTH={REDACTED}"),  # base64 of user:pass
        ("X-Api-Auth: abcdef1234567", f"X-Api-Auth: {REDACTED}"),
        ('{"X-Api-Auth": "k9"}', '{"X-Api-Auth": "k9"}'),  # too short for credentials
        ('headers: {"basicAuth": "admin:admin"}', f'headers: {{"basicAuth": "{REDACTED}"}}'),
        # headers
        ("X-Auth-Token: abc12", f"X-Auth-Token: {REDACTED}"),
        ("X-Api-Key: abc123", f"X-Api-Key: {REDACTED}"),
        ("Proxy-Authorization: Basic dXNlcjpwYXNz", f"Proxy-Authorization: Basic {REDACTED}"),
        ("Cookie: session=abc123", f"Cookie: {REDACTED}"),
        # a key's or token's short value: quoted after a name of two words, or a letter and a digit
        ('{"token": "abc123"}', f'{{"token": "{REDACTED}"}}'),
        ('{"api_key": "k1"}', f'{{"api_key": "{REDACTED}"}}'),
        ('{"authToken": "abc"}', f'{{"authToken": "{REDACTED}"}}'),
        ('{"clientSecret": "abc"}', f'{{"clientSecret": "{REDACTED}"}}'),
        ("apiKey: 'abc'", f"apiKey: '{REDACTED}'"),
        ("https://x.io/api?apiKey=abc1&x=1", f"https://x.io/api?apiKey={REDACTED}&x=1"),
        ("token=abc123", f"token={REDACTED}"),
        ("api_key=k1", f"api_key={REDACTED}"),
        (
            "kubectl create secret generic x --from-literal=api_key=Vx1",
            f"kubectl create secret generic x --from-literal=api_key={REDACTED}",
        ),
        # a setter's named value
        (
            "aws configure set aws_secret_access_key abc123def",
            f"aws configure set aws_secret_access_key {REDACTED}",
        ),
        (
            "aws configure set aws_session_token FwoGZXIvYXdzEabcdef --profile dev",
            f"aws configure set aws_session_token {REDACTED} --profile dev",
        ),
        (
            'aws configure set profile.dev.aws_secret_access_key "S3 cret"',
            f'aws configure set profile.dev.aws_secret_access_key "{REDACTED}"',
        ),
        (
            '{"command": "ls\\naws configure set aws_secret_access_key wJalrXUtnFEMIK7MDENGb"}',
            f'{{"command": "ls\\naws configure set aws_secret_access_key {REDACTED}"}}',
        ),
    ],
)
def test_the_value_goes(text: str, after: str) -> None:
    assert redact_text(text) == after
    assert redact_text(after) == after


@pytest.mark.parametrize(
    "text",
    [
        "PASS=12 FAIL=0",  # a bare pass is a count, a loop's statement
        "pass=1 bypass=true",
        "BYPASS_CACHE=true",
        "COMPASS=north",
        "PASSWORD_RESET_TIMEOUT=30",
        "DB_PW_FILE=/run/secrets/db",  # PW is not the name's last word
        "upward=1 upwards: 2",
        "AUTHOR=alice",
        "author: Ana Lima",
        "OAUTH_PROVIDER=github",
        "NEXTAUTH_URL=https://app.example.com",
        "AUTH_URL=https://id.example.com",
        "AUTH=abcdef12345",  # a bare auth names no secret
        "ENABLE_AUTH=true",
        "REQUIRE_AUTH=1",
        "DEFAULT_AUTH=oauth2",
        "X-Auth: required",
        "PAM_AUTH=/etc/pam.d/login",
        "SERVICE_AUTH=$SERVICE_AUTH",
        "requires_auth = check_user_session(request)",
        "PATH=/usr/local/bin:/usr/bin",
        "PATCH=1",
        "os.path.join(a, b)",
        "FILE_PAT = '*.py'",
        "re_pat = re.compile(r'a+b')",
        "IGNORE_PAT=node_modules",
        "compatible=yes",
        "token: str",
        "api_key: str = None",
        "token=token",
        "secret = True",
        '{"token": "the", "logprob": -0.1}',  # a tokenizer's text
        "clientSecret=abc",  # a bare short word
        "<secret>abc</secret>",
        "aws configure set aws_access_key_id AKIA0000",  # the key's id is no secret
        "aws configure set region eu-west-1",
        "# key__isnull=False is the same as has_key='j'",  # a predicate's name
    ],
)
def test_lookalikes_stay(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    "value",
    [
        {"DB_PW": "x", "SMTP_PASS": "y", "MYSQL_PWD": "z"},
        {"passWord": "x", "PassPhrase": "y"},
        {"GITLAB_PAT": "abc123def456"},
        {"NPM_AUTH": "abcdefgh12345", "basic_auth": "u:p"},
        {"X-Api-Auth": "Zq8vT2mW9x"},
    ],
)
def test_fields_so_named_lose_their_values(value: dict[str, str]) -> None:
    assert redact(value) == dict.fromkeys(value, REDACTED)


def test_a_short_password_name_given_as_a_fields_value() -> None:
    assert redact({"name": "DB_PW", "value": "x"}) == {"name": "DB_PW", "value": REDACTED}


@pytest.mark.parametrize(
    "value",
    [
        {"PASS": "x", "bypass": "y", "AUTHOR": "z"},
        {"require_auth": "yes", "default_auth": "oauth2"},
        {"file_pat": "*.py", "search_pat": "TODO"},
        {"proxy_auth": {"type": "basic"}},
    ],
)
def test_fields_so_named_keep_values_of_no_secrets_shape(value: dict[str, object]) -> None:
    assert redact(value) == value


def test_session_state_redacts_the_same_names() -> None:
    new = SessionState(
        {"notes": {"DB_PW": "x", "NPM_AUTH": "abcdefgh12345", "ENABLE_AUTH": "true"}}
    )
    out = redact_state(new, SessionState()).data["notes"]
    assert out == {"DB_PW": REDACTED, "NPM_AUTH": REDACTED, "ENABLE_AUTH": "true"}


@pytest.mark.parametrize(
    "block",
    [
        *("DB_PW", "_PW=", "dbPw ", "X-Api-Auth", "_auth=", "Auth:", "aPat=", "path", "_PAT "),
        *("passWord", "pass_word=", "token='a1' ", "apiKey: 'a' ", "X-Auth-Token: "),
        "aws configure set aws_secret_access_key ",
    ],
)
def test_a_text_dense_in_the_new_names_is_redacted_in_bounded_time(block: str) -> None:
    """100k characters of one near-miss, repeated: each trigger word is judged once, whole. The
    densest (``dbPw `` 20,000 times) takes about 0.45 s of CPU alone, as dense ``dbPassword``
    does; judged again to the text's end at each word it would take minutes."""
    text = (block * (100_000 // len(block) + 1))[:100_000]
    with cpu_timer() as took:
        once = redact_text(text)
    assert took.seconds < 1.5
    assert redact_text(once) == once
