"""Redaction judged on text as an agent's tools return it, written apart from the patterns: `env`
and `.env` dumps, credential files (`~/.aws/credentials`, `.npmrc`, `.pypirc`, `.netrc`, a Docker
`config.json`, a service account's JSON), `docker inspect`, `kubectl get secret`, `git remote -v`,
connection strings, `curl` lines, provider keys in code and prose (Chinese, Japanese and Korean
too), JSON-encoded tool arguments; and the look-alikes such output is full of, which must reach
the model as they were: git SHAs, UUIDs, lockfile hashes, images, counts, type annotations,
references to where a secret is kept (`$TOKEN`, `{{ .Values.apiKey }}`, `!Ref DbPassword`),
placeholders (`null`, `<sensitive>`, `****`)."""

from __future__ import annotations

import json
import re

import pytest

from rules.redact import REDACTED, redact
from tests.support.redaction_cases import (
    assert_linear,
    assert_lookalike_kept,
    assert_secrets_gone,
    b64,
    case,
)

OPENAI = "sk-proj-Xq3vN8pLm2KfR7tYw9ZbC4dHj6SgA1eU0oIiPlMnBvCxZaQwErTy"
ANTHROPIC = "sk-ant-api03-q8W2eR4tY6uI8oP0aS2dF4gH6jK8lZ1xC3vB5nM7qW9eR1tY3uI5oP7aS9dF1gH3jK5-AbAA"
GHP = "ghp_R4nD0mT0k3nV4lu3F0rT3st1ngAbCdEf1234"
GHO = "gho_16C7e42F292c6912E7710c838347Ae178B4a"
GLPAT = "glpat-xYz12AbC34dEf56GhI78"
SLACK = "xoxb-2837465019283-3948576102938-aBcDeFgHiJkLmNoPqRsTuVwX"
STRIPE = "sk_live_51HqLyjWDarjtT1zdp7dcXoxw9Rm4Hq8TwZ"
GOOGLE = "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
AKID = "AKIAIOSFODNN7EXAMPLQ"
ASECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
HF = "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"
NPM = "npm_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
SENDGRID = "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"
TWILIO_SID = "AC" + "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6"
TWILIO_TOKEN = "f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8"
DISCORD_BOT = "MTA5ODc2NTQzMjEwOTg3NjU0Mw.GaBcDe.fGhIjKlMnOpQrStUvWxYz0123456789AbCdEf"
TELEGRAM = "5432109876:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwi"
    "aWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PW = "Tr0ub4dor&3xQ"
PW2 = "s3cr3tP4ss"
AZURE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
SB_KEY = "abcDEF123ghiJKL456mnoPQR789stuVWX012yzAB="
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5Er"
    "kJggg=="
)
SRI = (
    "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5F"
    "vSg=="
)


# (text, what must not survive, what must)
SECRETS = [
    case(
        "env",
        "$ env\nHOME=/home/dev\nPATH=/usr/local/bin:/usr/bin\n"
        f"OPENAI_API_KEY={OPENAI}\nANTHROPIC_API_KEY={ANTHROPIC}\nGITHUB_TOKEN={GHP}\n"
        f"DATABASE_URL=postgres://app:{PW2}@db.internal:5432/app\nAWS_ACCESS_KEY_ID={AKID}\n"
        f"AWS_SECRET_ACCESS_KEY={ASECRET}\nSLACK_BOT_TOKEN={SLACK}\nHF_TOKEN={HF}\n"
        "TERM=xterm-256color\n",
        [OPENAI, ANTHROPIC, GHP, PW2, AKID, ASECRET, SLACK, HF],
        ["HOME=/home/dev\n", "TERM=xterm-256color", "postgres://app:", "@db.internal:5432/app"],
    ),
    case(
        "dotenv",
        f"NODE_ENV=production\nSTRIPE_SECRET_KEY={STRIPE}\nSENDGRID_API_KEY={SENDGRID}\n"
        f"TWILIO_ACCOUNT_SID={TWILIO_SID}\nTWILIO_AUTH_TOKEN={TWILIO_TOKEN}\n"
        'SESSION_SECRET="a very long passphrase with spaces 42"\n'
        f"REDIS_URL=redis://:{PW2}@cache.local:6379/0\n"
        f"MONGO_URI=mongodb+srv://admin:{PW}@cluster0.ab1cd.mongodb.net/prod?retryWrites=true\n"
        f"AMQP_URL=amqp://guest:{PW2}@rabbit:5672/vhost\nDISCORD_BOT_TOKEN={DISCORD_BOT}\n"
        f"TELEGRAM_BOT_TOKEN={TELEGRAM}\nPORT=3000\n",
        [STRIPE, SENDGRID, TWILIO_TOKEN, "passphrase with spaces", PW2, PW, DISCORD_BOT, TELEGRAM],
        ["NODE_ENV=production", "PORT=3000", TWILIO_SID, "retryWrites=true"],
    ),
    case(
        "aws credentials",
        f"[default]\naws_access_key_id = {AKID}\naws_secret_access_key = {ASECRET}\n"
        "aws_session_token = IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQDx\n"
        "region = us-east-1\n",
        [AKID, ASECRET, "IQoJb3JpZ2luX2VjEJr"],
        ["region = us-east-1", "[default]"],
    ),
    case(
        "npmrc",
        f"//registry.npmjs.org/:_authToken={NPM}\n"
        "//npm.pkg.github.com/:_authToken=abcd1234-ef56-7890-abcd-ef1234567890\n"
        "@myorg:registry=https://npm.pkg.github.com\nalways-auth=true\n",
        [NPM, "abcd1234-ef56-7890-abcd-ef1234567890"],
        ["always-auth=true", "@myorg:registry=https://npm.pkg.github.com"],
    ),
    case(
        "pypirc",
        "[pypi]\nusername = __token__\npassword = pypi-AgEIcHlwaS5vcmcCJGE4ZjQ3YjVkLWQ3ZjctNDU4Z"
        f"i1hNjA1LWEzMjM4N2Q1MjE0NwACKlsz\n[testpypi]\nusername = alice\npassword = {PW}\n",
        ["AgEIcHlwaS5vcmcCJGE4ZjQ3YjVkLWQ3", PW],
        ["username = __token__", "username = alice"],
    ),
    case(
        "netrc",
        f"machine github.com\n  login alice\n  password {GHP}\n"
        "machine api.heroku.com login me@x.com password 01234567-89ab-cdef-0123-456789abcdef\n"
        f"machine ftp.example.com login bob password {PW2}\n",
        [GHP, "01234567-89ab-cdef-0123-456789abcdef", PW2],
        ["machine github.com", "login alice", "login bob"],
    ),
    case(
        "docker config.json",
        json.dumps(
            {
                "auths": {
                    "https://index.docker.io/v1/": {"auth": b64(f"alice:{PW}")},
                    "ghcr.io": {"auth": b64(f"bob:{GHP}"), "identitytoken": "abcDEF123456ghi"},
                },
                "credsStore": "desktop",
            },
            indent=2,
        ),
        [b64(f"alice:{PW}"), b64(f"bob:{GHP}"), "abcDEF123456ghi"],
        ['"credsStore": "desktop"', "https://index.docker.io/v1/"],
    ),
    case(
        "service account json",
        json.dumps(
            {
                "type": "service_account",
                "project_id": "my-proj-123",
                "private_key_id": "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
                "private_key": f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n"
                "-----END PRIVATE KEY-----\n",
                "client_email": "svc@my-proj-123.iam.gserviceaccount.com",
                "token_uri": "https://oauth2.googleapis.com/token",
            },
            indent=2,
        ),
        [PEM_BODY, "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"],
        ["svc@my-proj-123.iam.gserviceaccount.com", "https://oauth2.googleapis.com/token"],
    ),
    case(
        "openssh private key",
        "$ cat ~/.ssh/id_ed25519\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAB"
        "G5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n$ ls",
        ["b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"],
        ["$ ls"],
    ),
    case(
        "pgp private key block",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0abcdEFGH\n"
        "-----END PGP PRIVATE KEY BLOCK-----",
        ["lQOYBF0abcdEFGH"],
    ),
    case(
        "docker inspect env",
        json.dumps(
            [
                {
                    "Id": "4f66ad9a0b2e8f3c1d5e7a9b0c2d4e6f8a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d",
                    "Config": {
                        "Env": [f"POSTGRES_PASSWORD={PW}", f"API_TOKEN={HF}", "LANG=C.UTF-8"],
                        "Image": "postgres:16",
                    },
                }
            ],
            indent=4,
        ),
        [PW, HF],
        ["LANG=C.UTF-8", "4f66ad9a0b2e8f3c1d5e7a9b0c2d4e6f8a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d"],
    ),
    case(
        "kubectl get secret yaml",
        f"apiVersion: v1\ndata:\n  password: {b64(PW)}\n  username: YWRtaW4=\nkind: Secret\n"
        "metadata:\n  name: db-creds\ntype: Opaque\n",
        [b64(PW), "YWRtaW4="],
        ["name: db-creds", "type: Opaque"],
    ),
    case(
        "kubectl get secret json",
        json.dumps(
            {
                "apiVersion": "v1",
                "data": {"DATABASE_URL": b64(f"postgres://a:{PW}@h/db")},
                "kind": "Secret",
            },
            indent=4,
        ),
        [b64(f"postgres://a:{PW}@h/db")],
    ),
    case(
        "git remote -v",
        f"origin\thttps://{GHP}@github.com/acme/app.git (fetch)\n"
        f"origin\thttps://x-access-token:{GHO}@github.com/acme/app.git (push)\n"
        f"upstream\thttps://oauth2:{GLPAT}@gitlab.com/acme/app.git (fetch)\n"
        f"mirror\thttps://alice:{PW2}@bitbucket.org/acme/app.git (fetch)\n",
        [GHP, GHO, GLPAT, PW2],
        ["@github.com/acme/app.git (fetch)", "x-access-token:", "oauth2:", "alice:"],
    ),
    case(
        "git extraheader",
        "http.https://github.com/.extraheader=AUTHORIZATION: basic "
        + b64("x-access-token:ghs_abcdefghijklmnopqrstuvwxyz0123456789"),
        [b64("x-access-token:ghs_abcdefghijklmnopqrstuvwxyz0123456789")],
    ),
    case(
        "azure storage connection string",
        "DefaultEndpointsProtocol=https;AccountName=mystorage;"
        f"AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net",
        [AZURE_KEY],
        ["AccountName=mystorage", "EndpointSuffix=core.windows.net"],
    ),
    case(
        "azure service bus connection string",
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        f"SharedAccessKey={SB_KEY}",
        [SB_KEY],
        ["SharedAccessKeyName=RootManageSharedAccessKey"],
    ),
    case(
        "sql server connection string",
        f"Server=tcp:sql.example.com,1433;Database=app;User ID=sa;Password={PW};Encrypt=True;",
        [PW],
        ["Encrypt=True", "Database=app"],
    ),
    case("jdbc query password", f"jdbc:postgresql://db/app?user=app&password={PW2}&ssl=1", [PW2]),
    case("libpq keywords", f'psql "host=db user=app password={PW2} sslmode=require"', [PW2]),
    case("password holding @ in a url", "postgres://app:p@ss:w0rd@db/app", ["p@ss:w0rd"]),
    case(
        "curl bearer jwt",
        f"curl -H 'Authorization: Bearer {JWT}' https://api.example.com/v1/me",
        [JWT],
        ["https://api.example.com/v1/me"],
    ),
    case("curl -u", f"curl -u admin:{PW2} https://jenkins.local/api/json", [PW2], ["admin:"]),
    case(
        "curl api key header",
        "curl https://api.anthropic.com/v1/messages -H 'x-api-key: abcdEFGH1234ijklMNOP5678' "
        "-H 'anthropic-version: 2023-06-01'",
        ["abcdEFGH1234ijklMNOP5678"],
        ["anthropic-version: 2023-06-01"],
    ),
    case(
        "curl private-token header",
        'curl --header "PRIVATE-TOKEN: abcdEFGH1234ijklMNOP" https://gitlab.example.com/api/v4',
        ["abcdEFGH1234ijklMNOP"],
    ),
    case(
        "set -x trace",
        f"+ curl -sS -H 'Authorization: Bearer {HF}' https://huggingface.co/api/whoami-v2\n"
        "+ export 'API_TOKEN=abcd1234efgh5678ijkl'",
        [HF, "abcd1234efgh5678ijkl"],
    ),
    case(
        "provider keys in code",
        f'a = anthropic.Anthropic(api_key="{ANTHROPIC}")\nclient = OpenAI(api_key="{OPENAI}")\n'
        f"headers = {{'Authorization': 'token {GHP}'}}\nmaps = '?address=x&key={GOOGLE}'",
        [ANTHROPIC, OPENAI, GHP, GOOGLE],
        ["anthropic.Anthropic(api_key=", "?address=x&key="],
    ),
    case(
        "twilio client with its account sid",
        f"client = Client('{TWILIO_SID}', '{TWILIO_TOKEN}')\n"
        f'client = Client("{TWILIO_SID}", "{TWILIO_TOKEN}")',
        [TWILIO_TOKEN],
        [TWILIO_SID],
    ),
    case(
        "discord bot token in code",
        f"bot.run('{DISCORD_BOT}')\nclient.login(\"{DISCORD_BOT}\")",
        [DISCORD_BOT],
        ["bot.run('"],
    ),
    case(
        "telegram api url",
        f"https://api.telegram.org/bot{TELEGRAM}/getUpdates",
        [TELEGRAM],
        ["/getUpdates"],
    ),
    case(
        "aws sts json",
        json.dumps(
            {
                "Credentials": {
                    "AccessKeyId": "ASIAIOSFODNN7EXAMPLQ",
                    "SecretAccessKey": ASECRET,
                    "SessionToken": "FwoGZXIvYXdzEBYaDHqa0AP1Z3xyz0123456789",
                    "Expiration": "2024",
                }
            },
            indent=2,
        ),
        ["ASIAIOSFODNN7EXAMPLQ", ASECRET, "FwoGZXIvYXdzEBYaDHqa0AP1Z3xyz0123456789"],
    ),
    case(
        "secrets manager secret string",
        json.dumps(
            {"Name": "prod/db", "SecretString": json.dumps({"username": "app", "password": PW})},
            indent=2,
        ),
        [PW],
        ["prod/db"],
    ),
    case(
        "azure keys as json",
        json.dumps(
            {
                "keyName": "RootManageSharedAccessKey",
                "primaryKey": SB_KEY,
                "secondaryKey": SB_KEY[::-1],
                "primaryMasterKey": AZURE_KEY,
            },
            indent=2,
        ),
        [SB_KEY, SB_KEY[::-1], AZURE_KEY],
        ["RootManageSharedAccessKey"],
    ),
    case(
        "vault kv get table",
        "====== Data ======\nKey         Value\n---         -----\n"
        f"password    {PW2}\napi_key     0123456789abcdefABCDEF\n",
        [PW2, "0123456789abcdefABCDEF"],
        ["Key         Value"],
    ),
    case(
        "yaml and toml config",
        f"database:\n  host: db.local\n  password: {PW}\nopenai:\n  api_key: {OPENAI}\n"
        f'[database]\nurl = "postgres://app:{PW2}@localhost/app"\n'
        'secret_key = "django-insecure-7x!k@p3#q9z$w1m&v5n^b8c*j2h(f4g)"\ndebug = false\n',
        [PW, OPENAI, PW2, "django-insecure-7x!k@p3#q9z$w1m&v5n^b8c*j2h(f4g)"],
        ["host: db.local", "debug = false"],
    ),
    case(
        "maven and gradle",
        f"<server><username>alice</username><password>{PW}</password></server>\n"
        f"ossrhPassword={PW2}\nsigning.keyId=24875D73\n",
        [PW, PW2],
        ["<username>alice</username>", "signing.keyId=24875D73"],
    ),
    case(
        "json-encoded tool arguments",
        json.dumps(
            {
                "arguments": json.dumps(
                    {"command": f"export OPENAI_API_KEY={OPENAI} && psql postgresql://u:{PW2}@h/db"}
                )
            }
        ),
        [OPENAI, PW2],
    ),
    case(
        "json escaped inside a command inside tool arguments",
        json.dumps({"command": f'curl -d "{{\\"password\\": \\"{PW}\\"}}" https://x/login'}),
        [PW],
        ["https://x/login"],
    ),
    case(
        "json escaped three times",
        json.dumps(json.dumps(json.dumps({"env": {"DB_PASSWORD": PW, "API_TOKEN": PW2 + "xy"}}))),
        [PW, PW2],
    ),
    case(
        "private key escaped on one json line",
        '{"private_key":"-----BEGIN PRIVATE KEY-----\\nMIIEvgIBADANBgkqhkiG9w0BAQEFAASC\\n'
        '-----END PRIVATE KEY-----\\n","x":1}',
        ["MIIEvgIBADANBgkqhkiG9w0BAQEFAASC"],
        ['"x":1'],
    ),
    case(
        "chinese prose",
        f"这是我的OpenAI密钥：{OPENAI}，请不要泄露。数据库密码是 {PW}，用户名是 admin。",
        [OPENAI, PW],
        ["这是我的OpenAI密钥：", "，请不要泄露。", "，用户名是 admin。"],
    ),
    case(
        "chinese forms",
        f"密码={PW}\n数据库密码：{PW2}\n访问令牌：abcd1234efgh5678\n口令: hunter2x",
        [PW, PW2, "abcd1234efgh5678", "hunter2x"],
    ),
    case(
        "japanese prose",
        f"APIキーは {GHP} です。データベースのパスワード：{PW}\nパスワードは{PW2}です。",
        [GHP, PW, PW2],
        ["APIキーは", "です。"],
    ),
    case("korean", f"비밀번호: {PW}\n비밀번호는 {PW2}입니다", [PW, PW2]),
    case(
        "ascii name, full-width colon or chinese copula",
        "API_KEY：0123456789abcdefXYZ\nOpenAI 的 API key 是 0123456789abcdefXYZ12345，请保密",
        ["0123456789abcdefXYZ"],
        ["API_KEY：", "，请保密"],
    ),
    case(
        "a key of lower-case letters alone",
        "OPENAI_API_KEY is set; the client sent sk-abcdefghijklmnopqrstuvwx in its header",
        ["sk-abcdefghijklmnopqrstuvwx"],
    ),
    case(
        "markdown backquotes one word: the secret",
        "- password: `Xy7pQ2zk9`\nThe database password: `Xy7pQ2zk9`\nDB_PASSWORD=`Xy7pQ2zk9`\n"
        "secret_key: `9f8e7d6c5b4a3f2e1d0c`\nAuthorization: Bearer `Xy7pQ2zk9abc`\n",
        ["Xy7pQ2zk9", "9f8e7d6c5b4a3f2e1d0c"],
    ),
]


@pytest.mark.parametrize(("text", "gone", "kept"), SECRETS)
def test_a_secret_in_tool_output_goes(text: str, gone: list[str], kept: list[str]) -> None:
    assert_secrets_gone(text, gone, kept)


# (text, what must survive; all of it when empty)
LOOKALIKES = [
    case(
        "git log",
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8\nAuthor: Alice <a@x.com>\n\n    fix token",
        [],
    ),
    case("uuids", "request_id=3f2504e0-4f89-11d3-9a0c-0305e82c3301 123e4567-e89b-12d3-a456", []),
    case(
        "package-lock",
        json.dumps(
            {
                "node_modules/lodash": {
                    "version": "4.17.21",
                    "integrity": SRI,
                    "resolved": "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz",
                }
            },
            indent=2,
        ),
        [],
    ),
    case(
        "poetry.lock and yarn.lock",
        '{file = "requests-2.31.0-py3-none-any.whl", hash = "sha256:58cd2187c01e70e6e26505bca7'
        '51777aa9f2ee0b7f4300988b709f44e013003f"},\n  resolved "https://registry.yarnpkg.com/'
        f'lodash/-/lodash-4.17.21.tgz#679591c564c3bffaae8454cf0b3df370c3d6911c"\n  integrity {SRI}',
        [],
    ),
    case(
        "base64 image",
        json.dumps({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}),
        [],
    ),
    case(
        "counts", json.dumps({"token_count": 1234, "max_tokens": 4096}) + "\nmax_tokens: 4096", []
    ),
    case(
        "names about passwords",
        json.dumps(
            {"password_reset_url": "https://app.example.com/reset", "password_min_length": 12}
        )
        + "\npassword_reset_url: https://app.example.com/reset\nPASSWORD_MIN_LENGTH=12",
        [],
    ),
    case(
        "digests",
        "postgres@sha256:4d3b4c5e2f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a",
        [],
    ),
    case(
        "public key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGb9lXPzE3c1Sgl8Hk9pL0 alice@laptop", []
    ),
    case("ids of providers", '{"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "fp": "fp_44709d6fcb"}', []),
    case("stripe publishable key", "pk_live_51HqLyjWDarjtT1zdp7dcXoxw9Rm4Hq8TwZ", []),
    case("github actions", "env:\n  GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}", []),
    case("env reads", 'api_key = os.environ["OPENAI_API_KEY"]\ntoken = os.getenv("GH_TOKEN")', []),
    case("auth failure", 'FATAL:  password authentication failed for user "app"', []),
    case("ssh failure", "Permission denied (publickey,password).", []),
    case(
        "kubectl get secrets",
        "NAME                  TYPE                                  DATA   AGE\n"
        "db-password           Opaque                                2      5d\n"
        "API_TOKEN       about 1 month ago",
        [],
    ),
    case(
        "aws configure list",
        "      Name                    Value             Type    Location\n"
        "access_key     ****************ABCD shared-credentials-file\n"
        "secret_key     ****************EFGH shared-credentials-file",
        [],
    ),
    case(
        "css classes", "a.sk-button {} .sk-spinner-wave {} :root { --sk-color-primary: #333 }", []
    ),
    case(
        "a masked token",
        "  ✓ Logged in to github.com\n  - Token: gho_************************************",
        [],
    ),
    case(
        "type annotations",
        "def login(username: str, password: str) -> Token:\n"
        "    api_key: Optional[str] = None\n    secret: SecretStr\n"
        "    token: str | None = None\n"
        "interface C { password: string; apiKey: string | undefined }\n"
        "struct Login { pub password: String, token: Option<String> }",
        [],
    ),
    case(
        "unset values", "password: null\ndb_password: ~\nadmin_token: <sensitive>\nsecret: true", []
    ),
    case(
        "bearer in a schema and prose",
        "securitySchemes:\n  bearerAuth:\n    type: http\n    scheme: bearer\n"
        "    bearerFormat: JWT\n"
        "Use Bearer authentication for the API.",
        [],
    ),
    case(
        "references to where a secret is kept",
        'curl -H "Authorization: Bearer $OPENAI_API_KEY" https://api.openai.com/v1/models\n'
        'curl -H "Authorization: Bearer ${GITHUB_TOKEN}" https://api.github.com/user\n'
        'curl -H "Authorization: Bearer $(gcloud auth print-access-token)" https://x\n'
        'POSTGRES_PASSWORD: "${DB_PASSWORD}"\napi_key: "{{ .Values.apiKey }}"\n'
        'password: "{{ vault_db_password }}"\nMasterUserPassword: !Ref DBPassword\n'
        "api_password: !secret http_password\nDB_PASSWORD=${DB_PASSWORD:?required}",
        [],
    ),
    case(
        "a backquoted command is where a secret comes from",
        "export TOKEN=`cat ~/.token`\nTOKEN=`gcloud auth print-access-token`\n",
        [],
    ),
    case(
        "aligned declarations: a Go struct, SQL columns",
        "type Client struct {\n\tToken     *oauth2.Token\n\tAPIKey    [32]byte\n"
        "\ttoken      *jwt.Token\n}\nCREATE TABLE users (\n  id        SERIAL,\n"
        "  password  VARCHAR(255),\n  token     TEXT\n);",
        [],
    ),
    case(
        "code after a key name: a value computed",
        "const keyName = 'x'; const value = computeSomething(keyName);\n"
        "key_name = 'primary'\nvalue = compute(x)\nkeyName: 'primary', value: someVariable123",
        [],
    ),
    case(
        "chinese and japanese text about passwords",
        "请输入密码。密码长度至少8位。密码是必填项；令牌已过期。パスワードを忘れた場合",
        [],
    ),
]


@pytest.mark.parametrize(("text", "_gone", "kept"), LOOKALIKES)
def test_a_lookalike_stays(text: str, _gone: list[str], kept: list[str]) -> None:
    assert_lookalike_kept(text, kept)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            {"primaryKey": SB_KEY, "secondaryKey": SB_KEY, "keyName": "RootManageSharedAccessKey"},
            {
                "primaryKey": REDACTED,
                "secondaryKey": REDACTED,
                "keyName": "RootManageSharedAccessKey",
            },
        ),
        (
            {"primary_key": "id", "sort_key": "created_at"},
            {"primary_key": "id", "sort_key": "created_at"},
        ),
        (
            [{"keyName": "key1", "permissions": "FULL", "value": AZURE_KEY}],
            [{"keyName": "key1", "permissions": "FULL", "value": REDACTED}],
        ),
    ],
)
def test_keys_a_cloud_lists_as_json_go(value: object, expected: object) -> None:
    assert redact(value) == expected


ADVERSARIAL = [
    "MTA5ODc2NTQzMjEwOTg3NjU0Mw." * 4000,
    "MTA5ODc2NTQzMjEwOTg3NjU0Mw.GaBcDe" * 3000,
    ("AC" + "a" * 32 + " ") * 2500,
    ("AC" + "a1" * 16 + ", '") * 2500,
    "sk-" * 33000,
    "sk-abc-" * 14000,
    "Bearer \n" * 12000,
    "密码：" * 30000,
    "パスワードは" * 16000,
    "password: Optional[" * 5000,
    "token: <" * 12000,
    "password: ****" * 7000,
    "api_key     " * 8000,
    '\\\\\\"password\\\\\\": ' * 5000,
    "Authorization: Bearer $(" * 4000,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: re.sub(r"\W+", "_", t[:16]))
def test_the_new_forms_are_linear(text: str) -> None:
    assert_linear(text)
