"""Redaction of captured payloads and stored error text: secret-named fields (any spelling that
names a key, secret, token, password or authorization) and key-shaped strings of common
providers. Counts and ordinary fields stay readable."""

from __future__ import annotations

import pytest

from rules.redact import REDACTED, redact, redact_text


@pytest.mark.parametrize(
    "name",
    [
        "authorization",
        "Authorization",
        "api_key",
        "apiKey",
        "x-api-key",
        "openai_api_key",
        "OPENAI_API_KEY",
        "anthropicApiKey",
        "client_secret",
        "secret",
        "secrets",
        "aws_secret_access_key",
        "password",
        "db_password",
        "passwd",
        "token",
        "access_token",
        "refresh_token",
        "accessToken",
        "auth_token",
        "id_token",
        "private_key",
        "proxy-authorization",
        "credentials",
    ],
)
def test_secret_named_fields_are_redacted(name: str) -> None:
    assert redact({name: "value-123"}) == {name: REDACTED}
    assert redact({"outer": [{name: "value-123"}]}) == {"outer": [{name: REDACTED}]}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("max_tokens", 100),
        ("max_completion_tokens", 50),
        ("prompt_tokens", 3),
        ("completion_tokens", 1),
        ("total_tokens", 4),
        ("cached_tokens", 0),
        ("tokens_before", 10),
        ("key_points", "short"),
        ("keys", "short"),
        ("monkey", "banana"),
        ("prompt_cache_key", "conversation-1"),
        ("model", "gpt-4o"),
        ("content", "hello"),
        ("token_count", 5),
    ],
)
def test_ordinary_fields_stay(name: str, value: object) -> None:
    assert redact({name: value}) == {name: value}


def test_logprob_tokens_are_text_not_secrets() -> None:
    entry = {"token": "Hello", "logprob": -0.1, "bytes": [72]}
    assert redact({"logprobs": {"content": [entry]}}) == {"logprobs": {"content": [entry]}}


@pytest.mark.parametrize(
    "text",
    [
        "resp_sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD",
        "KEY_sk-ant-api03-AbCdEf1234567890_xyz",
    ],
)
def test_a_long_prefixed_key_glued_after_an_underscore_is_redacted(text: str) -> None:
    assert redact_text(text) == text[: text.index("sk-")] + REDACTED


@pytest.mark.parametrize(
    "secret",
    [
        "sk-abcdefghijklmnop1234",
        "sk-proj-ABCDEFGH12345678xyz",
        "sk-ant-api03-AbCdEf123456-_xyz",
        "AKIAABCDEFGHIJKLMNOP",
        "AIzaSyA1234567890abcdefghijklmnopqrstu",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "gho_abcdefghijklmnopqrstuvwxyz0123456789",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp",
        "xoxp-123456789012-abcdefghij",
        "hf_abcdefghijklmnopqrstuvwxyzABCDEF",
        "sk_live_abcdefghijklmnop1234",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "gsk_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5Ef6Gh7I",  # Groq
        "xai-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3" * 2,  # xAI
        "pplx-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4C",  # Perplexity
        "r8_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1W",  # Replicate
        "ntn_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5E",  # Notion
        "PMAK-0123456789abcdef01234567-0123456789abcdef0123456789abcdef01",  # Postman
        "sntrys_" + "eyJpYXQiOjE3MDAwMDAwMDAuMCwidXJsIjoiaHR0cHM6Ly9zZW50cnkuaW8ifQ",  # Sentry
        "glsa_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv_0a1b2c3d",  # Grafana
        "key-0123456789abcdef0123456789abcdef",  # Mailgun
        "s.Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8",  # Vault's older service tokens
        "https://discord.com/api/webhooks/123456789012345678/"
        + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5Ef6Gh7Ij8Kl9Mn0Op",
    ],
)
def test_key_shaped_strings_are_redacted(secret: str) -> None:
    text = f"my key is {secret}, please keep it"
    out = redact_text(text)
    assert secret not in out and REDACTED in out
    assert out.startswith("my key is ") and out.endswith(", please keep it")


@pytest.mark.parametrize(
    ("text", "leaked"),
    [
        ("Authorization: Bearer abcdefgh12345678", "abcdefgh12345678"),
        ('{"api_key": "plainvalue123"}', "plainvalue123"),
        ("client_secret=s3cr3tvalue99", "s3cr3tvalue99"),
        ("password: hunter2hunter2", "hunter2hunter2"),
        ("access_token=abcdefgh12345678", "abcdefgh12345678"),
    ],
)
def test_assignments_to_secret_names_are_redacted(text: str, leaked: str) -> None:
    assert leaked not in redact_text(text)


@pytest.mark.parametrize(
    ("text", "after"),
    [  # a quoted value runs to its closing quote, past the quotes and backslashes it escapes
        ('{"password": "Sup3r\\"S3cret"}', '{"password": "[REDACTED]"}'),
        ('{"password": "Sup3r\\\\Tail77", "db": "x"}', '{"password": "[REDACTED]", "db": "x"}'),
        ("DB_PASSWORD='it\\'sTail77' next", "DB_PASSWORD='[REDACTED]' next"),
        ('{"name": "API_KEY", "value": "Ab\\"cd12345"}',
         '{"name": "API_KEY", "value": "[REDACTED]"}'),
        # JSON inside a string: its quotes are escaped once, the value ends at the next one
        ('{\\"password\\": \\"hunter2x\\", \\"db\\": \\"x\\"}',
         '{\\"password\\": \\"[REDACTED]\\", \\"db\\": \\"x\\"}'),
    ],
)  # fmt: skip
def test_a_quoted_value_is_redacted_past_its_escapes(text: str, after: str) -> None:
    assert redact_text(text) == after


@pytest.mark.parametrize(
    ("text", "leaked", "kept"),
    [
        ("<password>hunter2</password>", "hunter2", "<password>[REDACTED]</password>"),
        ('<Password type="x"> s3cr3t </Password>', "s3cr3t", '<Password type="x"> [REDACTED] <'),
        ("<ns:api_key>abcdefgh1234</ns:api_key>", "abcdefgh1234", "<ns:api_key>[REDACTED]</"),
        ("<db><pass>x</pass><db_pass>pw1</db_pass></db>", "pw1", "<db_pass>[REDACTED]</db_pass>"),
    ],
)
def test_secret_xml_elements_lose_their_text(text: str, leaked: str, kept: str) -> None:
    out = redact_text(text)
    assert leaked not in out and kept in out
    assert redact_text(out) == out


@pytest.mark.parametrize(
    "text",
    [
        "<passwordHint>the dog</passwordHint>",  # not a secret's name
        "<secret>abc</secret>",  # shorter than a key or token could be
        "<tokens>12</tokens>",
        "<password/> and <key>x</key>",
        "a < password > b",
    ],
)
def test_ordinary_xml_stays(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    "text",
    ["max_tokens=1000 and 12 tokens", "a sketch of skills", "ask-me-anything", "AIza short"],
)
def test_ordinary_text_stays(text: str) -> None:
    assert redact_text(text) == text


# ----- gaps closed in issue 15: each of these passed unredacted before -----


@pytest.mark.parametrize(
    ("text", "leaked", "kept"),
    [
        (
            "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtnFEMI",
            "AWS_SECRET_ACCESS_KEY=",
        ),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI", "aws_secret_access_key"),
        (
            'curl -H "Authorization: Basic dXNlcjpwYXNz" https://x',
            "dXNlcjpwYXNz",
            'Authorization: Basic [REDACTED]" https://x',
        ),
        ("authorization: Basic YTpi", "YTpi", "authorization: Basic "),
        ("auth = 'Basic dXNlcjpwYXNz'", "dXNlcjpwYXNz", "auth = 'Basic "),
        ("password=hunter2", "hunter2", "password="),
        ('{"password": "1234"}', "1234", '{"password": "[REDACTED]"}'),
        ("PGPASSWORD=abc psql -h db", "abc", "PGPASSWORD=[REDACTED] psql -h db"),
        ("export DB_PASS=x1", "x1", "DB_PASS="),
        ("password = 1234", "1234", "password = "),
        ('password="correct horse"', "correct horse", 'password="[REDACTED]"'),
        ('echo {\\"password\\": \\"1234\\"}', "1234", '\\"[REDACTED]\\"'),
        ("postgres://user:pass@host:5432/db", ":pass@", "postgres://user:[REDACTED]@host:5432/db"),
        (
            "git clone https://user:tok@github.com/o/r",
            ":tok@",
            "https://user:[REDACTED]@github.com/o/r",
        ),
        ("redis://:s3cret@localhost:6379", "s3cret", "redis://:[REDACTED]@localhost:6379"),
        ("api_key = 0123456789abcdef0123456789abcdef", "0123456789abcdef", "api_key = "),
        (
            "Your API key is 0123456789abcdef0123456789abcdef.",
            "0123456789abcdef",
            "Your API key is [REDACTED].",
        ),
        ("X-Api-Key: abcdef1234567890", "abcdef1234567890", "X-Api-Key: "),
        (
            "https://x-access-token:ghs_abcdefghijklmnopqrstuvwxyz0123456789@github.com/o",
            "ghs_",
            "https://x-access-token:[REDACTED]@github.com/o",
        ),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n", "b3BlbnNzaC1rZXk", ""),
        (
            "glpat-abcdefghijklmnopqrst and npm_abcdefghijklmnopqrstuvwxyz0123456789",
            "glpat-",
            " and ",
        ),
        # a file's next line inside a JSON string (a call's arguments, a JSON tool output): the
        # "n" of the escape is no word the key runs on from
        ('{"content": "# keys\\nsk-proj-ESCAPEDabcdefgh"}', "sk-proj", '"# keys\\n[REDACTED]"'),
        ('{"stdout": "wrote\\nAKIAABCDEFGHIJKLMNOP"}', "AKIA", "wrote\\n[REDACTED]"),
        ("a\\tghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_", "a\\t[REDACTED]"),
        ("x\\r\\neyJhbGciOiJIUzI1.eyJzdWIiOiIx.SflKxwRJSMeK", "eyJ", "x\\r\\n[REDACTED]"),
        ("https://x/cb?api_key%3Dsk-abcdefghijklmnop", "sk-abc", "api_key%3D[REDACTED]"),
    ],
)
def test_secrets_that_used_to_pass(text: str, leaked: str, kept: str) -> None:
    out = redact_text(text)
    assert leaked not in out and REDACTED in out
    assert kept in out


@pytest.mark.parametrize(
    "text",
    [
        "commit 0123456789abcdef0123456789abcdef01234567",  # git SHAs stay
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "request 0123456789abcdef0123456789abcdef done",  # a bare 32-hex id (UUID without dashes)
        "monkey 0123456789abcdef0123456789abcdef",  # "key" inside a word is no secret name
        "sorted(items, key=operator.itemgetter(1))",  # a bare ``key=`` is code
        "http://localhost:8080/path?x=1",
        "pass=1 bypass=true",
        "basic auth is enough here",
        "if password == 'abc':",
        '"max_tokens": 1000, "prompt_tokens": 12',
        'headers = {"Authorization": f"Bearer {token}"}',
        "ask-questions-first and task-abcdefghijklmnop",  # a word ending "sk-"
        "task-proj-abcdefghijklmnopqrstuvwxyz and disk-admin-panel-configuration-tool",
        "s.getElementsByTagNameNS(ns) and this.s.Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8",  # calls, members
        "C:\\Users\\ana\\risk-assessment-2026-final",
    ],
)
def test_lookalikes_stay(text: str) -> None:
    assert redact_text(text) == text


def test_a_private_key_without_its_end_is_redacted_to_the_end() -> None:
    text = "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n(truncated)"
    assert redact_text(text) == "before\n" + REDACTED
    whole = "a -----BEGIN PRIVATE KEY-----\nMII\n-----END PRIVATE KEY----- b"
    assert redact_text(whole) == f"a {REDACTED} b"


def test_a_command_of_kilobytes_is_redacted_once_then_remembered() -> None:
    """A heredoc command stays in the working set's report for as long as its diagnostics stay
    open, and every log row redacts the report again: texts up to 16 kB are memoised."""
    from rules.redact import _redact_short

    secret = "sk-proj-" + "A1b2C3d4" * 6
    command = "cat > t.py <<'EOF'\n" + "print('x' * 3)\n" * 300 + f"KEY = '{secret}'\nEOF"
    assert 3_000 < len(command) < 16_000
    _redact_short.cache_clear()  # what earlier tests left may fill it: this one's entry alone
    before = _redact_short.cache_chars()
    first = redact_text(command)
    assert secret not in first and REDACTED in first
    assert _redact_short.cache_chars() >= before + len(command)  # held: the next is a dict hit
    assert redact_text(command) is first


def test_redact_copies_plain_values_and_redacts_under_every_container_kind() -> None:
    """Numbers, flags and nulls stay as they are under any name (a count named ``token``), in
    dicts and lists alike; a secret-named text and a key-shaped string do not, in a dict
    subclass or a list of them too; the result is a copy."""
    from collections import OrderedDict

    key = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4"
    value = {
        "token": 5,
        "api_key": None,
        "secret": True,
        "ratio": 0.5,
        "items": [1, 2.5, None, key, {"password": "hunter22"}],
        "nested": OrderedDict(access_token="abcdefgh12345678", n=3),
    }
    out = redact(value)
    assert out["token"] == 5 and out["api_key"] is None and out["secret"] is True
    assert out["ratio"] == 0.5
    assert out["items"][:3] == [1, 2.5, None]
    assert key not in str(out) and out["items"][4] == {"password": REDACTED}
    assert out["nested"] == {"access_token": REDACTED, "n": 3}
    assert out is not value and out["items"] is not value["items"]
    assert value["items"][3] == key  # the input is left as it was


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("the redis password is RedisCliPw_123", "the redis password is [REDACTED]"),
        ("the password is hunter2, keep it", "the password is [REDACTED], keep it"),
        ('my DB password was "x9y8z7" yesterday', 'my DB password was "[REDACTED]" yesterday'),
        ("password is too short", "password is too short"),  # no digit nor symbol: no password
        ("the password is incorrect!", "the password is incorrect!"),
        ("Password is required", "Password is required"),
        ("the API key is abc123XYZ456, use it", "the API key is [REDACTED], use it"),
        ("my token was ghx9d8s7f6", "my token was [REDACTED]"),
        ("api key: Zx9-1234abcd", "api key: [REDACTED]"),
        ("Access Key = Zx9-1234abcd", "Access Key = [REDACTED]"),
        ("the token is expired", "the token is expired"),  # no digit nor symbol
        ("the token was ab12", "the token was ab12"),  # shorter than a token
        ("sorted(rows, key=len2x_abcdef)", "sorted(rows, key=len2x_abcdef)"),  # a bare key: code
        ("primary key: user_id_1234", "primary key: user_id_1234"),
        ("set the db password to hunter2x", "set the db password to [REDACTED]"),
        ("Change the admin password to S3cret!x.", "Change the admin password to [REDACTED]."),
        ("set API key to sk-live-abc123def456", "set API key to [REDACTED]"),
        ("reset the password to default", "reset the password to default"),  # nothing set
        ("a password to access the db", "a password to access the db"),
        ("the password is S3cret!x, keep it", "the password is [REDACTED], keep it"),  # all of it
        ("the token is abc1!def!ghi now", "the token is [REDACTED] now"),
        ("the password is P@ssw0rd!", "the password is [REDACTED]"),
        # where a secret goes, or what it becomes, is no value
        ("Move the password to config_prod.yaml", "Move the password to config_prod.yaml"),
        ("Add the API key to settings_local.py", "Add the API key to settings_local.py"),
        ("Rename the secret to DB_PASSWORD_V2", "Rename the secret to DB_PASSWORD_V2"),
        ("write the token to ~/.config/gh/hosts.yml", "write the token to ~/.config/gh/hosts.yml"),
        ("Pass the password to get_connection()", "Pass the password to get_connection()"),
    ],
)
def test_a_password_said_in_prose(text: str, kept: str) -> None:
    assert redact_text(text) == kept


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("CREATE ROLE app WITH LOGIN PASSWORD 'S3cretPw';", "PASSWORD '[REDACTED]';"),
        ('ALTER USER postgres PASSWORD "pg";', 'PASSWORD "[REDACTED]";'),
        ("CREATE USER 'bob'@'%' IDENTIFIED BY 'MyS3cret';", "IDENTIFIED BY '[REDACTED]';"),
        (
            "ALTER USER root@localhost IDENTIFIED WITH mysql_native_password BY 'R00tPw';",
            "mysql_native_password BY '[REDACTED]';",
        ),
        ("machine api.x.io login bob password hunter2xyz", "login bob password [REDACTED]"),
        ("machine h\n  login bob\n  password S3cret!\n", "password [REDACTED]\n"),
        ("Driver={ODBC Driver 18};Server=db;Uid=sa;Pwd=MyOdbcPw1;", "Uid=sa;Pwd=[REDACTED];"),
        ("https://x.io/login?user=bob&password%3Dhunter2xyz", "password%3D[REDACTED]"),
        (
            "curl https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe",
            "/bot[REDACTED]/getMe",
        ),
        ("TELEGRAM_TOKEN=7012345678:AAE1a2b3c4d5e6f7g8h9i0jKLMNOPQRSTUVWX", "TOKEN=[REDACTED]"),
        ("    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0t", "client-key-data: [R"),
        (
            '{"auths": {"ghcr.io": {"auth": "Ym9iOmdocF9hYmNkZWYxMjM0NTY="}}}',
            '"auth": "[REDACTED]"',
        ),
        ("$ cat ~/.pgpass\nlocalhost:5432:*:postgres:S3cretPw", "postgres:[REDACTED]"),
        ("echo '*:*:appdb:app:an0ther!' >> ~/.pgpass", "'*:*:appdb:app:[REDACTED]'"),
        ("https://db.example/q?user=bob&pwd=Hunter2x", "&pwd=[REDACTED]"),  # a query's
        ("Server=db;Uid=sa;Pwd=$uperS3cret!;Database=x", ";Pwd=[REDACTED];"),  # any first char
        ("DB_PWD=hunter2x", "DB_PWD=[REDACTED]"),
        ("SMTP_PWD: 's3cr3t!'", "SMTP_PWD: '[REDACTED]'"),
        ('{"dbPwd": "abc123"}', '{"dbPwd": "[REDACTED]"}'),
        # a URL in JSON with its slashes escaped (PHP's json_encode, Java's)
        ('{"dsn":"postgres:\\/\\/app:S3cretPw@db:5432\\/x"}', "app:[REDACTED]@db"),
        ('"https:\\/\\/' + "a1b2c3d4" * 5 + '@github.com\\/o\\/r"', '"https:\\/\\/[REDACTED]@'),
        # a key written with JSON's \u escapes
        ('{"key": "sk\\u002dproj-' + "Ab3dE" * 8 + '"}', '{"key": "[REDACTED]"}'),
        ('token: "ghp\\u005f' + "a1B2c3" * 6 + '"', 'token: "[REDACTED]"'),
    ],
)
def test_passwords_in_sql_netrc_odbc_urls_and_configs(text: str, kept: str) -> None:
    out = redact_text(text)
    assert kept in out, out
    assert redact_text(out) == out


@pytest.mark.parametrize(
    "text",
    [
        "your login and password are required",  # no digit nor symbol after "password"
        "the password reset link expired",
        "PWD=/home/bob OLDPWD=/srv",  # a folder
        "cd $PWD; ls",
        '{"auth": "required", "type": "oauth"}',  # no base64 of user:password
        "the key-data section lists certificates",
        "order 12345678:AAB is ready",  # too short for a bot token
        "localhost:5432:app:me:trust",  # five fields, but no password file named
        "see ~/.pgpass; flake8: src/a.py:12:3:E501:long",  # a path's field holds a slash
        "PWD=/home/bob/src",
        "env | grep PWD=~/x",
        "PWD=C:\\Users\\bob",
        "pwd = os.getcwd()",
        "let pwd = process.cwd();",
        'here=`pwd`; pwd=`pwd`',
        "cwd=$PWD",
        "the pwd command prints the folder",
        'pwd = os.environ["PWD"]',
        "const pwd = process.env.PWD;",
        "pwd: string",
        "PWD=src",
        '"a\\u002db\\u002dc": "plain text\\u0021"',  # escapes that hide no key
    ],
)
def test_lookalikes_of_those_stay(text: str) -> None:
    assert redact_text(text) == text


def test_a_docker_configs_auth_field_is_redacted_only_as_credentials() -> None:
    config = {"auths": {"ghcr.io": {"auth": "Ym9iOmdocF9hYmNkZWYxMjM0NTY=", "email": "b@x"}}}
    assert redact(config) == {"auths": {"ghcr.io": {"auth": REDACTED, "email": "b@x"}}}
    assert redact({"auth": "bearer", "client-key-data": "LS0tLS1CRUdJTg=="}) == {
        "auth": "bearer",
        "client-key-data": REDACTED,
    }
