"""Redaction of passwords given on a command line (``mysql -pSECRET``, ``curl -u user:SECRET``,
``sshpass -p SECRET``), of ``Cookie`` / ``Set-Cookie`` header values, and of the key shapes and
AWS secret access keys printed without a name; with the lookalikes that must stay: ports
(``ssh -p 22``, ``docker run -p 8080:80``), users (``-u 1000:1000``), prompts (``mysql -p``,
``curl -u user``), the word "cookie" in prose, short or hex-only runs."""

from __future__ import annotations

import pytest

from rules.redact import REDACTED, redact, redact_text
from tests.support.cpu_clock import cpu_timer

DO_HEX = "5a4fd12aabfe228f219e9cb0eb53f16947ccf25ec84d8dbc74254770f58904db"
AGE_KEY = "AGE-SECRET-KEY-15FERYXHRDZ9M6Y09MR8WRERWZGJ6F8NTXVHXYRDLM5AAHN0T09NL4UJY86"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    ("text", "leaked", "kept"),
    [
        ("mysql -pS3cretPw db", "S3cretPw", "mysql -p[REDACTED] db"),
        (
            "mysql -h db.internal -u root -pS3cretPw -e 'SELECT 1'",
            "S3cretPw",
            "-u root -p[REDACTED] -e 'SELECT 1'",
        ),
        ("mysqldump -uroot -p'S3cret Pw' app > d.sql", "S3cret", "-p'[REDACTED]' app > d.sql"),
        ('mariadb-dump -u app -p"S3cret" app', "S3cret", '-p"[REDACTED]" app'),
        ("docker exec db mysql -uroot -p123456 shop", "123456", "-p[REDACTED] shop"),
        ("/usr/bin/mysqladmin -u root -pS3cret status", "S3cret", "-p[REDACTED] status"),
        ('{"command": "mysql -uroot -pS3cretPw app"}', "S3cretPw", '-p[REDACTED] app"}'),
        ("mysql --password=S3cret db", "S3cret", "--password=[REDACTED] db"),
        ("PGPASSWORD=S3cret psql -h db app", "S3cret", "PGPASSWORD=[REDACTED] psql"),
        ("MYSQL_PWD=S3cret mysql -u root app", "S3cret", "MYSQL_PWD=[REDACTED] mysql -u root"),
        ("export MYSQL_PWD='S3cret'", "S3cret", "MYSQL_PWD='[REDACTED]'"),
        ("curl -u user:S3cretPw https://x.io", "S3cretPw", "curl -u user:[REDACTED] https://x.io"),
        (
            "curl --user 'admin:S3cret Pw' https://x",
            "S3cret",
            "--user 'admin:[REDACTED]' https://x",
        ),
        ('curl --user "admin:pw" https://x', ":pw", '--user "admin:[REDACTED]" https://x'),
        (
            "curl -s -X POST -H 'Content-Type: application/json' -d '{\"a\": 1}' "
            "-uadmin:S3cretPw https://x",
            "S3cretPw",
            "-uadmin:[REDACTED] https://x",
        ),
        ("curl -sS \\\n  -u user:S3cretPw \\\n  https://x", "S3cretPw", "-u user:[REDACTED] \\"),
        ("curl -ku user:S3cretPw https://x", "S3cretPw", "-ku user:[REDACTED]"),
        ("curl --proxy-user proxy:S3cretPw https://x", "S3cretPw", "proxy:[REDACTED] https://x"),
        ("curl -U proxy:S3cretPw https://x", "S3cretPw", "-U proxy:[REDACTED] https://x"),
        ("curl 'https://x/?a=1&b=2' -u u:S3cretPw", "S3cretPw", "-u u:[REDACTED]"),
        ("curl -b 'session=abc123def456' https://x", "abc123def456", "-b 'session=[REDACTED]'"),
        ("curl --cookie sid=abc123def456 https://x", "abc123def456", "--cookie sid=[REDACTED] "),
        ('{"cmd": "curl -u \\"user:S3cretPw\\" https://x"}', "S3cretPw", '\\"user:[REDACTED]\\"'),
        ("sshpass -p S3cret ssh -p 22 u@host", "S3cret", "sshpass -p [REDACTED] ssh -p 22 u@host"),
        ("sshpass -pS3cret scp f host:", "S3cret", "sshpass -p[REDACTED] scp f host:"),
        ("sshpass -v -p 'S3cret Pw' rsync a h:b", "S3cret", "sshpass -v -p '[REDACTED]' rsync"),
        ("docker login -u me -p S3cretPw ghcr.io", "S3cretPw", "-p [REDACTED] ghcr.io"),
        ("az login -u a@b.c -p 'S3cret Pw'", "S3cret", "-p '[REDACTED]'"),
        ("mongosh --password S3cretPw --host db", "S3cretPw", "--password [REDACTED] --host"),
        ('deploy --api-key "abcdefgh1234" run', "abcdefgh1234", '--api-key "[REDACTED]" run'),
        ("vault-cli --client-secret abcdefgh1234", "abcdefgh1234", "--client-secret [REDACTED]"),
        ("psql postgres://admin:pa#ss?w@h/db", "pa#ss", "admin:[REDACTED]@h/db"),
        ("ls && sshpass -p S3cret ssh h", "S3cret", "ls && sshpass -p [REDACTED] ssh h"),
        # a quote paired across two commands: the second is read as an argument of the first
        ("curl ' curl -b 'sid=S3cretx' https://x", "S3cretx", "-b 'sid=[REDACTED]' https://x"),
        ("sshpass ' sshpass -p 'S3cret x' ssh h", "S3cret", "-p '[REDACTED]' ssh h"),
        ('ssh h "mysql -e \'1\'" "mysql -pS3cret db"', "S3cret", '"mysql -p[REDACTED] db"'),
        # a line of a command held in a JSON string (a tool call's arguments): the name follows
        # an escaped line break, whose ``n`` had read as part of a longer word
        ('{"command": "cd app\\nmysql -uroot -pS3cret db"}', "S3cret", "-p[REDACTED]"),
        ('{"command": "ls\\nsshpass -p S3cret ssh h"}', "S3cret", "-p [REDACTED] ssh h"),
        ('{"command": "set -e\\ncurl -u me:S3cretPw https://x"}', "S3cretPw", "-u me:[REDACTED]"),
        ('{"command": "ls\\tcurl -b \'sid=S3cretx\' https://x"}', "S3cretx", "sid=[REDACTED]"),
        ('{"command": "ls\\ndocker login -u me -p S3cretPw"}', "S3cretPw", "-p [REDACTED]"),
        ("redis-cli -h cache -a S3cretPw FLUSHALL", "S3cretPw", "-a [REDACTED] FLUSHALL"),
        ("redis-cli --pass 'S3cret Pw' ping", "S3cret", "--pass '[REDACTED]' ping"),
        ("mongosh --host db -u admin -p S3cretPw", "S3cretPw", "-u admin -p [REDACTED]"),
        ("mongodump -u admin -p 'S3cret Pw' --out d", "S3cret", "-p '[REDACTED]' --out d"),
        ("twine upload -u __token__ -p S3cretPw dist/*", "S3cretPw", "-p [REDACTED] dist/*"),
        ("ldapsearch -x -D cn=admin -w S3cretPw -b dc=x", "S3cretPw", "-w [REDACTED] -b"),
        ("keytool -list -keystore k.jks -storepass S3cretPw", "S3cretPw", "-storepass [REDACTED]"),
        ("openssl pkcs12 -export -passout pass:S3cretPw -out a", "S3cretPw", "pass:[REDACTED]"),
        ("smbclient //h/share -U admin%S3cretPw", "S3cretPw", "-U admin%[REDACTED]"),
        ("sqlcmd -S db -U sa -P 'S3cret Pw!' -Q 'SELECT 1'", "S3cret", "-P '[REDACTED]' -Q"),
        ("bcp t out f.dat -S db -U sa -P S3cretPw -c", "S3cretPw", "-P [REDACTED] -c"),
        ("influx setup -u admin -p S3cretPw -o org -b b -f", "S3cretPw", "-p [REDACTED] -o"),
        ("htpasswd -b -c /etc/nginx/.htpasswd admin S3cretPw", "S3cretPw", "admin [REDACTED]"),
        ("htpasswd -bc .htpasswd admin 'S3cret Pw'", "S3cret", "admin '[REDACTED]'"),
        ("htpasswd -nbB admin S3cretPw > users", "S3cretPw", "admin [REDACTED] > users"),
        (
            r"net use Z: \\srv\share P@ssw0rd1 /user:CORP\bob",
            "P@ssw0rd1",
            r"share [REDACTED] /user",
        ),
        ("net user bob S3cret! /add", "S3cret!", "bob [REDACTED] /add"),
        (r'cmd /c "net.exe use \\fs\data Passw0rd /persistent:no"', "Passw0rd", "[REDACTED] /p"),
        ("rabbitmqctl add_user app S3cretPw", "S3cretPw", "add_user app [REDACTED]"),
        ("rabbitmqctl change_password app S3cretPw", "S3cretPw", "app [REDACTED]"),
        ("mc alias set local http://h:9000 minio S3cretPw", "S3cretPw", "minio [REDACTED]"),
        ("mc config host add s3 https://s3 AKEY S3cretPw", "S3cretPw", "AKEY [REDACTED]"),
        ("docker login -u me --password-stdin <<< 'S3cretPw'", "S3cretPw", "<<< '[REDACTED]'"),
        ("http -a alice:S3cretPw POST https://api.x/items", "S3cretPw", "-a alice:[REDACTED] POST"),
        ("https --auth alice:S3cretPw api.x/me", "S3cretPw", "--auth alice:[REDACTED] api"),
        ("http --auth=alice:S3cretPw api.x/me", "S3cretPw", "--auth=[REDACTED] api"),
        ("http -aalice:S3cretPw api.x/me", "S3cretPw", "-aalice:[REDACTED] api"),
        ("xh -a bob:S3cretPw example.org", "S3cretPw", "-a bob:[REDACTED] example"),
        (
            "npm config set //npm.corp.io/:_authToken S3cretTok3nValue",
            "S3cretTok3nValue",
            ":_authToken [REDACTED]",
        ),
        ("npm config set _auth dXNlcjpTM2NyZXRQdw==", "dXNlcjpTM2NyZXRQdw", "_auth [REDACTED]"),
        ("yarn config set npmAuthToken S3cretTok3nValue", "S3cretTok3nValue", "Token [REDACTED]"),
    ],
)
def test_passwords_on_a_command_line_are_redacted(text: str, leaked: str, kept: str) -> None:
    out = redact_text(text)
    assert leaked not in out and REDACTED in out
    assert kept in out
    assert redact_text(out) == out


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Cookie: session=abc123def456ghi", "Cookie: [REDACTED]"),
        ("> Cookie: a=b; c=d\r\n> Accept: */*", "> Cookie: [REDACTED]\r\n> Accept: */*"),
        (
            "< Set-Cookie: sid=abc123def456; Path=/; HttpOnly",
            "< Set-Cookie: [REDACTED]; Path=/; HttpOnly",
        ),
        ("< set-cookie: __Host-sid=xyz987; Secure", "< set-cookie: [REDACTED]; Secure"),
        ('curl -H "Cookie: sid=abc123def456" https://x', '-H "Cookie: [REDACTED]" https://x'),
        ('{"Cookie": "sid=abc123; theme=dark"}', '{"Cookie": "[REDACTED]"}'),
        ('"HTTP/1.1 200 OK\\r\\nSet-Cookie: sid=abc123\\r\\n"', "Set-Cookie: [REDACTED]\\r\\n"),
        ("session_cookie = 'sid=abc123def'", "session_cookie = '[REDACTED]'"),
        ('document.cookie = "a=b; sid=abc123"', 'document.cookie = "[REDACTED]"'),
    ],
)
def test_cookie_header_values_are_redacted(text: str, kept: str) -> None:
    out = redact_text(text)
    assert kept in out
    assert "abc123" not in out and "xyz987" not in out and "a=b" not in out
    assert redact_text(out) == out


@pytest.mark.parametrize(
    "secret",
    [
        "xapp-1-A0123ABCDEF-1234567890123-0123456789abcdef0123456789abcdef",
        "xoxe-1-My0xLTEyMzQ1Njc4OTAxMi0xMjM0NTY3ODkwMTIz",
        f"dop_v1_{DO_HEX}",
        f"doo_v1_{DO_HEX}",
        f"dor_v1_{DO_HEX}",
        AGE_KEY,
        "build_sk_live_abcdefghijklmnop1234",  # a "_" before a Stripe key: still the key's shape
        "prefix_rk_live_abcdefghijklmnop1234",
        "hvs.CAESIJ1234567890abcdefghijklmnop",  # HashiCorp Vault
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",  # Stripe webhooks
        "dapi0123456789abcdef0123456789abcdef",  # Databricks
        "shpat_0123456789abcdef0123456789abcdef",  # Shopify
        "lin_api_" + "a1B2" * 10,  # Linear
        "sig=abcdefghijklmnopqrstuvwxyz0123456789%2B%3D",  # Azure SAS
        "&X-Amz-Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
        "?Signature=nitfHRCrtziwO2HwPfWw~yYDhUF5EwRunQA-j19DzZrvDh6hQ73lDx~-ar3Uoc",  # CloudFront
        "&X-Goog-Signature=8a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f",  # GCS
    ],
)
def test_more_key_shapes_are_redacted(secret: str) -> None:
    for text in (f"token is {secret} ok", f'{{"value": "{secret}"}}', secret):
        out = redact_text(text)
        assert secret not in out and REDACTED in out
        assert secret[-12:] not in out
        assert redact_text(out) == out


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"aws_secret_access_key = {AWS_SECRET}", "aws_secret_access_key = [REDACTED]"),
        (f'{{"SecretAccessKey": "{AWS_SECRET}"}}', '"SecretAccessKey": "[REDACTED]"'),
        (f"||  SecretAccessKey |  {AWS_SECRET} ||", "SecretAccessKey |  [REDACTED] ||"),
        (f"Secret access key: {AWS_SECRET}", "Secret access key: [REDACTED]"),
        (
            f"ACCESSKEY\tAKIAIOSFODNN7EXAMPLE\t2015-03-09T18:39:23.411Z\t{AWS_SECRET}\tActive\tBob",
            "ACCESSKEY\t[REDACTED]\t2015-03-09T18:39:23.411Z\t[REDACTED]\tActive\tBob",
        ),
        (f"AKIAIOSFODNN7EXAMPLE,{AWS_SECRET}\n", "[REDACTED],[REDACTED]\n"),
    ],
)
def test_aws_secret_access_keys_are_redacted(text: str, kept: str) -> None:
    out = redact_text(text)
    assert AWS_SECRET not in out and kept in out
    assert redact_text(out) == out


@pytest.mark.parametrize(
    "text",
    [
        "mysql -h host -u root",
        "psql -h db -U app --password app_db",  # asks for it: the next word is the database
        "mysql -u root --password shop",
        "gh auth login --with-token --token-file /tmp/t",
        "ssh -p 2222 host && docker login ghcr.io",
        "gh auth login -p https -h github.com -w",  # gh's -p: the git protocol
        "mysql -h host -u root -p mydb",  # -p alone: mysql prompts
        "mysql -P 3306 -u root app",
        "psql -h db -U app --password app_db",  # psql's --password only forces a prompt
        "docker run --name mysql -p 3306:3306 -d mysql:8",
        "docker run --name mysql -p3306:3306 mysql:8",
        "mkdir -p /var/lib/mysql && chown -R mysql:mysql /var/lib/mysql",
        "docker run -p 8080:80 nginx",
        "ssh -p 22 user@host",
        "git log -p -3",
        "docker run -u 1000:1000 img",
        "sudo -u www-data:www-data ls",
        "curl -u user https://x.io",  # curl prompts for the password
        "curl -u user: https://x.io",
        "curl --user-agent 'a:b' https://x.io",
        "curl -b cookies.txt -c cookies.txt https://x.io",
        "curl https://x.io; ps -u root:root",
        "sshpass -f ~/.pw ssh -p 22 host",
        "sshpass -e ssh -p 2222 host",
        "a cookie with coffee; the Cookie header carries the session",
        "Cookie: a small piece of data the browser keeps",
        "cookie-based sessions, cookies: 3",
        "SESSION_COOKIE_NAME = 'sessionid'",
        "raw_cookie = get_str_from_wsgi(self.environ, 'HTTP_COOKIE', '')",  # code, not a cookie
        "cookie = request.COOKIES.get('sessionid')",
        "cd /srv && pwd && PWD=/tmp OLDPWD=/srv ls",
        f"dop_v1_{DO_HEX[:40]} is too short",
        "AGE-SECRET-KEY-1 is where the key goes",
        "task-abcdefgh and task-abcdefghijklmnop",
        "risk_test_abcdefghijklmnop1234 and desk_live_abcdefghijklmnop1234",
        "AKIAIOSFODNN7EXAMPLE commit 0123456789abcdef0123456789abcdef01234567",
        "commit 0123456789abcdef0123456789abcdef01234567 by xapp",
        "openssl rsa -in k.pem -passin env:KEY_PASS -out k2.pem",  # names where it is
        "openssl enc -aes256 -pass file:pw.txt -in a -out b",
        "mongod --port 27017 -p 1 && mongorestore --drop dump/",  # mongod is no client
        "ldapsearch -x -W -b dc=example,dc=com",  # -W prompts
        "smbclient -L //h -U admin",  # prompts
        "htpasswd -c .htpasswd admin",  # no -b: htpasswd prompts
        r"net use \\srv\share /user:bob *",  # * asks for it
        "net user bob /delete",
        "the net use of caching is clear",  # no share named
        "htpasswd -B /etc/.htpasswd admin",
        "rabbitmqctl list_users && rabbitmqctl add_vhost app",
        "mc alias list && mc cp a local/bucket",
        "sqlcmd -S db -E -Q 'SELECT 1'",  # Windows authentication
        "influx bucket list -o org",
        "http -a alice https://api.example.com",  # prompts
        "see http://example.com -a x:y",  # a URL names no command
        "npm config set registry https://registry.example.com",
        "requires_auth = check_user_session(request)",  # no npm _auth
        "basic_auth=enabled_for_all_routes",
        "jdbc:oracle:thin:@//db.example.com:1521/XEPDB1",  # no login in it
        "Q~abcdefGhijklmnOPqrstuvWXyz012345678",  # no characters before the Q~
    ],
)
def test_lookalikes_stay(text: str) -> None:
    out = redact_text(text)
    if text.startswith("AKIA"):  # the key id goes, the git SHA beside it stays
        assert out == REDACTED + text[len("AKIAIOSFODNN7EXAMPLE") :]
    else:
        assert out == text


def test_a_captured_payload_loses_command_line_passwords() -> None:
    body = {
        "messages": [
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "function": {
                            "arguments": (
                                '{"command": "mysql -uroot -pS3cretPw -e \\"show tables\\" shop"}'
                            )
                        }
                    }
                ],
            },
            {"role": "tool", "content": "< Set-Cookie: sid=abc123def456; Path=/"},
        ]
    }
    out = str(redact(body))
    assert "S3cretPw" not in out and "abc123def456" not in out
    assert "show tables" in out and "Path=/" in out


@pytest.mark.parametrize(
    "unit",
    ["curl 'curl ", "curl 'curl ';", "'curl' ", 'sshpass -p X ssh h "mysql -pY" ', "mysql -pX "],
)
def test_command_lines_are_read_in_linear_time(unit: str) -> None:
    # each word is read at most twice: 256 KiB of one of these took 4-5 s when a quoted name's
    # words were read again each time (a chain), ~0.1 s now
    text = unit * ((256 << 10) // len(unit))
    with cpu_timer() as took:
        redact_text(text)
    assert took.seconds < 1.5, f"{took.seconds:.2f} s"


def test_positional_passwords_are_read_only_where_the_command_ends_with_them() -> None:
    """``mc alias set NAME URL KEY SECRET`` ends with its secret: a longer run of words is no
    such command line. Read anyway, redacting one command's value (``mongosh -p mc``) shifted
    the others' words, and a second redaction changed the first's output."""
    text = "x \\nmongosh -p mc alias set mc alias set mc alias set mc alias set "
    once = redact_text(text)
    assert redact_text(once) == once
    assert redact_text("mc alias set s3 https://s3 AKEY S3cretPw --api S3v4") == (
        "mc alias set s3 https://s3 AKEY [REDACTED] --api S3v4"
    )


@pytest.mark.parametrize(
    ("text", "leaked", "kept"),
    [
        (
            "Client secret value: Xyz8Q~abcdefGhijklmnOPqrstuvWXyz012345",
            "abcdefGhijklmnOPqrstuvWXyz012345",
            "Client secret value: [REDACTED]",
        ),  # Azure's portal shows it once, under this label
        (
            '{"password": "x", "clientSecret2": "aB.3Q~d3f-GhIjKlMnOpQrStUvWxYz0123456789"}',
            "GhIjKlMnOpQrStUvWxYz0123456789",
            "[REDACTED]",
        ),
        (
            "url=jdbc:oracle:thin:scott/Tig3rPass@db.example.com:1521:ORCL",
            "Tig3rPass",
            "jdbc:oracle:thin:scott/[REDACTED]@db.example.com:1521:ORCL",
        ),
        (
            "spring.datasource.url: jdbc:oracle:oci:hr/hr_Pw9@//localhost:1521/XEPDB1",
            "hr_Pw9",
            "jdbc:oracle:oci:hr/[REDACTED]@//localhost",
        ),
        (
            "//registry.npmjs.org/:_auth=dXNlcjpTM2NyZXRQdw==\nemail=me@x.io",
            "dXNlcjpTM2NyZXRQdw",
            "/:_auth=[REDACTED]\nemail=me@x.io",
        ),  # an .npmrc's base64 of user:password
    ],
)
def test_azure_client_secrets_oracle_logins_and_npm_auth_are_redacted(
    text: str, leaked: str, kept: str
) -> None:
    out = redact_text(text)
    assert leaked not in out and kept in out
    assert redact_text(out) == out


def test_the_new_shapes_stay_linear_on_dense_lookalikes() -> None:
    texts = [
        "aaa1Q~" * 20_000,  # every Q~ preceded as a secret's is, none long enough
        "Q~ " + "abcd1234 " * 20_000,  # one Q~: every position tried
        "jdbc:oracle:thin:a/" * 10_000 + "b" * 300,  # logins that never reach an @
        "http -a " * 10_000,
        "_auth" * 20_000,
    ]
    for text in texts:
        with cpu_timer() as took:
            redact_text(text)
        assert took.seconds < 1.0, (text[:20], took.seconds)


@pytest.mark.parametrize(
    "text",
    [
        "token = os.environ['GITHUB_TOKEN']",
        'token = os.getenv("HF_TOKEN")',
        '"command": "python -c \\"token = os.getenv(\\\\\\"HF_TOKEN\\\\\\")\\""',  # JSON in JSON
        "password = getpass.getpass()",
        'password=input("pw: ")',
        "const apiKey = process.env.OPENAI_API_KEY;",
        "SECRET_KEY = settings.SECRET_KEY",
        "DB_PASSWORD=$DB_PASSWORD",
        "API_KEY=${API_KEY:-}",
        "export GITHUB_TOKEN=${GH_TOKEN:-}",
    ],
)
def test_code_reading_a_secret_is_no_secret(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("text", "leaked"),
    [
        ("password=Pa55word.Summer", "Pa55word"),  # dotted, but no secret's name last
        ("secret_key = settings.DEBUG_VALUE_2", "DEBUG_VALUE"),
        ("DB_PASSWORD=$ecretPw1", "ecretPw1"),  # a "$" word that names no secret
        ("password=Pa55word(x1", "Pa55word"),  # a call's shape, its argument no quote
        ("token = hunter2hunter2()x", "hunter2hunter2"),
    ],
)
def test_literals_shaped_like_code_still_go(text: str, leaked: str) -> None:
    assert leaked not in redact_text(text)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("the db password hunter2 works", "the db password [REDACTED] works"),
        ("use password Tr0ub4dor&3 for login", "use password [REDACTED] for login"),
        ("wifi password 12345678, ask Bob", "wifi password [REDACTED], ask Bob"),
    ],
)
def test_a_password_said_as_the_next_word(text: str, kept: str) -> None:
    assert redact_text(text) == kept
    assert redact_text(kept) == kept


@pytest.mark.parametrize(
    "text",
    [
        "the password policy requires 12 characters",
        "password reset link sent to bob@example.com",
        "rotate the password weekly",
        "password 2 times wrong",
        "password field_validation failed",  # a name of words joined by "_"
        "password config.yaml holds it",  # a place
    ],
)
def test_the_word_after_password_that_is_no_password_stays(text: str) -> None:
    assert redact_text(text) == text
