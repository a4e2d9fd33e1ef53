"""Secret names in the spellings a ``password``/``key``/``token`` net missed: short forms of
password as a name's last word (``DB_PW``, ``SMTP_PASS``), a camelCase ``passWord``, names that
say secret only of a value of a secret's shape (``NPM_AUTH``, ``X-Api-Auth``, ``GITLAB_PAT``),
``aws configure set``'s named value. With
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
        ("GITLAB_PAT=glpatAbc123def456ghi789", f"GITLAB_PAT={REDACTED}"),
        ("gitlabPat: glx9y8z7w6v5u4t3s2r1", f"gitlabPat: {REDACTED}"),
        ("NPM_AUTH=abcdefgh12345678", f"NPM_AUTH={REDACTED}"),
        ("BASIC_AUTH=user:pw1", f"BASIC_AUTH={REDACTED}"),
        ("PROXY_AUTH=dXNlcjpwYXNz", f"PROXY_AUTH={REDACTED}"),  # base64 of user:pass
        ("X-Api-Auth: abcdef1234567890xy", f"X-Api-Auth: {REDACTED}"),
        ('{"X-Api-Auth": "k9"}', '{"X-Api-Auth": "k9"}'),  # too short for credentials
        ('headers: {"basicAuth": "admin:s3cret"}', f'headers: {{"basicAuth": "{REDACTED}"}}'),
        # headers
        ("X-Auth-Token: abc12def", f"X-Auth-Token: {REDACTED}"),
        ("X-Api-Key: abc123de", f"X-Api-Key: {REDACTED}"),
        ("Proxy-Authorization: Basic dXNlcjpwYXNz", f"Proxy-Authorization: Basic {REDACTED}"),
        ("Cookie: session=abc123", f"Cookie: {REDACTED}"),
        # a secret name inside a long value of a shaped name is judged in its turn
        (
            "PAM_AUTH=/etc/" + "x" * 260 + "?password=hunter2",
            "PAM_AUTH=/etc/" + "x" * 260 + f"?password={REDACTED}",
        ),
        (
            "FILE_PAT='" + "x" * 260 + " password=hunter2'",
            "FILE_PAT='" + "x" * 260 + f" password={REDACTED}'",
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
        (  # after global options
            "aws --profile dev --region eu-west-1 configure set aws_secret_access_key abc123def",
            f"aws --profile dev --region eu-west-1 configure set aws_secret_access_key {REDACTED}",
        ),
        (
            "aws --debug configure set aws_session_token FwoGZXIvYXdzEabcdef",
            f"aws --debug configure set aws_session_token {REDACTED}",
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
        "aws configure set aws_secret_access_key $AWS_SECRET_ACCESS_KEY",  # where it is kept
        "# key__isnull=False is the same as has_key='j'",  # a predicate's name
        # a key's or token's value shorter than a real one's (a tokenizer's, a shortcut's, a page's)
        '{"pad_token": "<pad>", "eos_token": "</s>", "mask_token": "[MASK]"}',
        'tokenizer.pad_token = "<pad>"',
        '{"hot_key": "F1", "shard_key": "s1", "next_page_token": "CAE"}',
        '{"token": "x1", "logprob": -0.1}',
        '{"token": "abc123"}',
        "next_page_token=CAEQASgBMAE4AQ cancellation_token=CancellationToken1",
        # a pass or a power, not a password
        "max_pw=100 power_pw=5",
        # a time, a count, an id, a scheme and its scope after an auth name; a pattern after a pat
        "last_auth: 2024-05-01T10:00:00Z",
        "LAST_AUTH=2024-05-01 MAX_AUTH=1000000 user_auth=12345678",
        "DEFAULT_AUTH=oauth2:openid KRB_AUTH=krb5:GSSAPI",
        'tag_pat = "release-v1" branch_pat = "feature-123" VERSION_PAT=v1_2_3_4',
    ],
)
def test_lookalikes_stay(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    "value",
    [
        {"DB_PW": "x", "SMTP_PASS": "y", "MYSQL_PWD": "z"},
        {"passWord": "x", "PassPhrase": "y"},
        {"GITLAB_PAT": "glpatAbc123def456ghi789"},
        {"NPM_AUTH": "abcdefgh12345678", "basic_auth": "u:p4ss"},
        {"X-Api-Auth": "Zq8vT2mW9xZq8vT2mW"},
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
        {"first_pass": "ok", "render_pass": "main", "test_pass": "yes", "max_pw": "100"},
        {"pad_token": "<pad>", "eos_token": "</s>", "next_page_token": "CAEQASgBMAE4AQ"},
    ],
)
def test_fields_so_named_keep_values_of_no_secrets_shape(value: dict[str, object]) -> None:
    assert redact(value) == value


def test_session_state_redacts_the_same_names() -> None:
    new = SessionState(
        {"notes": {"DB_PW": "x", "NPM_AUTH": "abcdefgh12345678", "ENABLE_AUTH": "true"}}
    )
    out = redact_state(new, SessionState()).data["notes"]
    assert out == {"DB_PW": REDACTED, "NPM_AUTH": REDACTED, "ENABLE_AUTH": "true"}


@pytest.mark.parametrize(
    "block",
    [
        *("DB_PW", "_PW=", "dbPw ", "X-Api-Auth", "_auth=", "Auth:", "aPat=", "path", "_PAT "),
        *("passWord", "pass_word=", "token='a1' ", "apiKey: 'a' ", "X-Auth-Token: "),
        "aws configure set aws_secret_access_key ",
        "aws --profile dev --region x --output json ",
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
