"""Redaction judged on a second set of text as an agent's tools and its prose produce it, written
apart from the patterns and from tests/rules/test_redact_heldout.py: signed URLs, kubeconfigs,
Terraform state, Vault's output, shell lines continued with ``\\``, credentials in Python calls,
values partly masked; and the look-alikes beside them that must reach the model as they were."""

from __future__ import annotations

import json
import re

import pytest

from tests.support.redaction_cases import (
    assert_linear,
    assert_lookalike_kept,
    assert_secrets_gone,
    b64,
    case,
)

OPENAI = "sk-proj-Hv7Tq2LmR9xKp4WzN8cBf3YdJ6sG1aE0uIoPlMnBvCxZaQwErTyUi"
ANTHROPIC = "sk-ant-api03-Zx9Cv8Bn7Mq6Wl5Ek4Rj3Th2Yg1Uf0Id-PoAs9Df8Gh7Jk6Lq5Wz4Xc3Vb2Nm1-QwAA"
FINE_PAT = (
    "github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ0123"
)
GLPAT = "glpat-Q1w2E3r4T5y6U7i8O9p0"
SLACK_USER = "xoxp-1234567890123-1234567890123-1234567890123-0a1b2c3d4e5f60718293a4b5c6d7e8f9"
RK_LIVE = "rk_live_51NbQwErTyUiOpAsDfGhJkLzXcVbNm"
SENDGRID = "SG.aBcDeFgHiJkLmNoPqRsTuV.wXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ012"
MAILGUN = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"  # as Mailgun's own documentation shows one
GOOGLE = "AIzaSyB3x9Q2w8E7r6T5y4U3i2O1p0AsDfGhJkL"
PULUMI = "pul-6f1c2d3e4b5a4c6d8e7f0a1b2c3d4e5f60718293"
VAULT = "hvs.CAESIJx7Yq3vN8pLm2KfR7tYw9ZbC4dHj6SgA1eU0oIiPlMnGh4KHGh2cy5"
PW = "c0rrect-H0rse!"
PW2 = "Zq8#vLp2mW"
JWT = (
    "eyJhbGciOiJSUzI1NiIsImtpZCI6ImFiYyJ9.eyJpc3MiOiJrdWJlcm5ldGVzL3NlcnZpY2VhY2NvdW50In0."
    "c2lnbmF0dXJlX2J5dGVzX2hlcmVfMTIzNDU2Nzg5MA"
)
KEY_B64 = b64("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm")
CERT_B64 = b64("-----BEGIN CERTIFICATE-----\nMIIC5zCCAc+gAwIBAgIBATANBgkqhkiG9w0BAQsFADAVMRMw")
PEM_LINE = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0"


# (text, what must not survive, what must)
SECRETS = [
    case(
        "connection strings in a compose file",
        "services:\n  api:\n    environment:\n"
        f"      - DATABASE_URL=postgresql://api:{PW}@pg:5432/api?sslmode=disable\n"
        f"      - CACHE_URL=redis://:{PW2}@redis:6379/1\n"
        f"      - BROKER=amqp://worker:{PW2}@rabbitmq:5672/%2F\n"
        f"      - MONGO=mongodb+srv://ro:{PW}@c0.x1y2z.mongodb.net/app?authSource=admin\n",
        [PW, PW2],
        ["sslmode=disable", "@redis:6379/1", "@rabbitmq:5672/%2F", "authSource=admin"],
    ),
    case(
        "signed urls",
        "https://acct.blob.core.windows.net/c/report.csv?sv=2022-11-02&ss=b&srt=o&sp=r"
        "&se=2030-01-01T00:00:00Z&sig=Xq3vN8pLm2KfR7tYw9ZbC4dHj6SgA1eU0oIiPlMnBvC%3D\n"
        "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20300101T000000Z"
        "&X-Amz-Signature=0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0\n"
        "GET https://graph.example.com/me?fields=id,name&access_token=EAAGm0PX4ZCpsBAKZCZBzZA1b2c3\n",
        [
            "Xq3vN8pLm2KfR7tYw9ZbC4dHj6SgA1eU0oIiPlMnBvC",
            "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
            "EAAGm0PX4ZCpsBAKZCZBzZA1b2c3",
        ],
        ["sp=r", "X-Amz-Algorithm=AWS4-HMAC-SHA256", "fields=id,name"],
    ),
    case(
        "kubeconfig",
        "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n"
        f"    client-certificate-data: {CERT_B64}\n    client-key-data: {KEY_B64}\n"
        f"- name: sa\n  user:\n    token: {JWT}\n",
        [KEY_B64, JWT],
        [f"client-certificate-data: {CERT_B64}", "- name: sa"],
    ),
    case(
        "npmrc, pypirc, netrc, git credential store",
        f"//registry.npmjs.org/:_authToken={OPENAI[8:44]}\n"
        f"[pypi]\nusername = __token__\npassword = pypi-AgEIcHlwaS5vcmc{OPENAI[8:60]}\n"
        f"machine gitlab.example.com login ci password {GLPAT}\n"
        f"https://alice:{FINE_PAT}@github.com\n",
        [OPENAI[8:44], OPENAI[20:60], GLPAT, FINE_PAT],
        ["username = __token__", "login ci", "https://alice:", "@github.com"],
    ),
    case(
        "docker config auths",
        json.dumps({"auths": {"registry.gitlab.com": {"auth": b64(f"ci:{GLPAT}")}}}, indent=2),
        [b64(f"ci:{GLPAT}")],
        ["registry.gitlab.com"],
    ),
    case(
        "pem private key, whole and cut off",
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_LINE}\n{PEM_LINE[::-1]}\n"
        "-----END RSA PRIVATE KEY-----\n$ head -c 120 key.pem\n"
        f"-----BEGIN PRIVATE KEY-----\n{PEM_LINE[5:]}",
        [PEM_LINE, PEM_LINE[::-1], PEM_LINE[5:]],
        ["$ head -c 120 key.pem"],
    ),
    case(
        "provider keys in prose",
        f"I set OPENAI to {OPENAI} and the Anthropic one to {ANTHROPIC}; the PAT is {FINE_PAT}, "
        f"GitLab's {GLPAT}, Slack {SLACK_USER}, Stripe {RK_LIVE}, SendGrid {SENDGRID}, the "
        f"Mailgun key {MAILGUN}, Maps {GOOGLE}, Vault {VAULT}, Pulumi {PULUMI}.",
        [
            *(OPENAI, ANTHROPIC, FINE_PAT, GLPAT, SLACK_USER, RK_LIVE, SENDGRID, MAILGUN),
            *(GOOGLE, VAULT, PULUMI),
        ],
        ["I set OPENAI to", "the Anthropic one to"],
    ),
    case(
        "mailgun in code and a log",
        f'requests.post(url, auth=("api", "{MAILGUN}"), data={{"to": "a@x.com"}})\n'
        f"DEBUG mailgun: POST /v3/mg.example.com/messages with {MAILGUN}",
        [MAILGUN],
        ['data={"to": "a@x.com"}'],
    ),
    case(
        "gcp service account private key",
        json.dumps(
            {
                "type": "service_account",
                "private_key": f"-----BEGIN PRIVATE KEY-----\n{PEM_LINE}\n"
                "-----END PRIVATE KEY-----\n",
                "client_id": "112233445566778899001",
            }
        ),
        [PEM_LINE],
        ['"client_id": "112233445566778899001"'],
    ),
    case(
        "vault token create table",
        "Key                  Value\n---                  -----\n"
        f"token                {VAULT}\ntoken_duration       768h\ntoken_renewable      true\n",
        [VAULT],
        ["token_duration       768h", "token_renewable      true"],
    ),
    case(
        "terraform state",
        json.dumps(
            {
                "resources": [
                    {
                        "type": "aws_db_instance",
                        "instances": [
                            {
                                "attributes": {
                                    "engine": "postgres",
                                    "password": PW,
                                    "master_user_secret": [],
                                },
                                "sensitive_attributes": [
                                    [{"type": "get_attr", "value": "password"}]
                                ],
                            }
                        ],
                    },
                    {"type": "random_password", "instances": [{"attributes": {"result": PW2}}]},
                ]
            },
            indent=2,
        ),
        [PW],
        ['"engine": "postgres"', '"value": "password"'],
    ),
    case(
        "aws sts as text, new relic",
        "$ aws sts get-session-token --output text\nCREDENTIALS\tASIAIOSFODNN7EXAMPLQ\t"
        "2030-01-01T00:00:00Z\twJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\t"
        "FwoGZXIvYXdzEBYaDHqa0AP1Z3xyz0123456789abcdefghij\n"
        "newrelic key NRAK-ABCDEFGHIJKLMNOPQRSTUVWXYZ0 set\n",
        [
            "ASIAIOSFODNN7EXAMPLQ",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "FwoGZXIvYXdzEBYaDHqa0AP1Z3xyz0123456789abcdefghij",
            "NRAK-ABCDEFGHIJKLMNOPQRSTUVWXYZ0",
        ],
        ["2030-01-01T00:00:00Z", "newrelic key "],
    ),
    case(
        "env dumps",
        f"$ printenv | sort\nGH_TOKEN={FINE_PAT}\nHOME=/root\nPGPASSWORD={PW2}\n"
        f'"Env": ["MYSQL_ROOT_PASSWORD={PW}", "PATH=/usr/local/sbin:/usr/bin"]\n',
        [FINE_PAT, PW2, PW],
        ["HOME=/root", "PATH=/usr/local/sbin:/usr/bin"],
    ),
    case(
        "kubectl get secret -o yaml",
        f"apiVersion: v1\ndata:\n  api-key: {b64(GOOGLE)}\n  tls.key: {KEY_B64[:60]}\n"
        "kind: Secret\nmetadata:\n  name: web\ntype: Opaque\n",
        [b64(GOOGLE), KEY_B64[:60]],
        ["name: web", "type: Opaque"],
    ),
    case(
        "passwords on command lines",
        f"$ curl -fsS -u deploy:{PW2} https://ci.example.com/job/x/build\n"
        f"$ mysql -h db -u root -p{PW2} app < dump.sql\n"
        f"$ PGPASSWORD='{PW}' psql -h db -U app -c 'select 1'\n"
        f"$ sshpass -p {PW2} ssh -o StrictHostKeyChecking=no pi@10.0.0.7\n"
        f"$ ssh-keygen -t ed25519 -N '{PW}' -C deploy -f ~/.ssh/id_deploy\n"
        f"$ ssh-keygen -p -P {PW2} -N '' -f ~/.ssh/id_rsa\n",
        [PW2, PW],
        ["curl -fsS -u deploy:", "pi@10.0.0.7", "select 1", "-C deploy -f ~/.ssh/id_deploy"],
    ),
    case(
        "a key continued on the next line of a shell command",
        "curl https://api.openai.com/v1/chat/completions \\\n"
        f'  -H "Authorization: Bearer {OPENAI[:30]}\\\n{OPENAI[30:]}" \\\n'
        "  -d @body.json\n"
        f"$ export ANTHROPIC_API_KEY={ANTHROPIC[:40]}\\\n{ANTHROPIC[40:]}\n"
        f"$ gh auth login --with-token <<< {FINE_PAT[:20]}\\\n{FINE_PAT[20:]}\n",
        [OPENAI[30:], ANTHROPIC[40:], FINE_PAT[20:], FINE_PAT[12:20]],
        ["https://api.openai.com/v1/chat/completions \\\n", "-d @body.json"],
    ),
    case(
        "basic auth given to an http client in code",
        f'r = requests.get(url, auth=("admin", "{PW}"))\n'
        f"s.auth = ('svc-backup', '{PW2}')\n"
        f'httpx.get(url, auth=httpx.BasicAuth("admin", "{PW2}"))\n'
        f"requests.get(url, auth=HTTPDigestAuth(user, '{PW}'))\n"
        f'req.SetBasicAuth("deploy", "{PW}")\n'
        f"curl_setopt($ch, CURLOPT_USERPWD, 'admin:{PW2}');\n"
        f"headers: {{ Authorization: 'Basic ' + btoa('admin:{PW}') }}\n"
        + json.dumps({"code": 's.auth = ("ci", "' + PW2 + '")'}),
        [PW, PW2],
        ['("admin", "', "('svc-backup', '"],
    ),
    case(
        "a mongo init script and a flask app",
        'db.createUser({ user: "app", pwd: "' + PW + '", roles: ["readWrite"] });\n'
        "app.secret_key = b'_5#y2L\"F4Q8z\\n\\xec]/'\n",
        [PW, "_5#y2L"],
        ['user: "app"', 'roles: ["readWrite"]'],
    ),
    case(
        "wp-config.php",
        "<?php\ndefine( 'DB_NAME', 'wordpress' );\ndefine( 'DB_USER', 'wp' );\n"
        f"define( 'DB_PASSWORD', '{PW}' );\n"
        "define('AUTH_KEY', 'x7!k@p3#q9z$w1m&v5n^b8c*j2h(f4g)');\n"
        "define( 'WP_DEBUG', false );\n",
        [PW, "x7!k@p3#q9z$w1m&v5n^b8c*j2h(f4g)"],
        ["define( 'DB_NAME', 'wordpress' );", "define( 'WP_DEBUG', false );"],
    ),
    case(
        "a password in an f-string",  # read as a bare word, the prefix went and the value stayed
        f'DB_PASSWORD = f"{PW}"\nconn = connect(password=F"{PW2}", user="app")\n',
        [PW, PW2],
        ['user="app"'],
    ),
    case(
        "a password in another language's prefixed literal",
        f'var password = @"{PW}";\nvar Secret = $"{PW2}";\nlet api_key = String::from("{PW}x");\n'
        f'let token = r#"{PW2}y"#;\nauto db_password = std::string("{PW}z");\n'
        f'PASSWORD = u8"{PW2}w";\nString password = new String("{PW}j");\n'
        f"db:\n  password: !!str {PW2}k\n",
        [PW, PW2],
        ["var password = @", "String::from(", "std::string(", "new String(", "!!str"],
    ),
    case(
        "a value partly masked",
        "password: hunter2*****\nDB_PASSWORD=Tr0ub4d0r******\npassphrase: correct-horse-****\n"
        '{"api_key": "9f86d081884c7d65****"}',
        ["hunter2", "Tr0ub4d0r", "9f86d081884c7d65", "correct-horse"],
    ),
]


@pytest.mark.parametrize(("text", "gone", "kept"), SECRETS)
def test_a_secret_goes(text: str, gone: list[str], kept: list[str]) -> None:
    assert_secrets_gone(text, gone, kept)


# (text, what must survive; all of it when empty)
LOOKALIKES = [
    case(
        "git and digests",
        "HEAD is now at 9fceb02d0ae598e95dc970b74767f19372d61af8 fix: rotate token\n"
        "Digest: sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
        "github.com/pkg/errors v0.9.1 h1:FEBLx1zS214owpjy7qsBeixbURkuhQAwrK5UwLGTwt4=\n"
        'checksum = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"',
        [],
    ),
    case(
        "a folder given as pwd",  # a quoted pwd is a password in a database's user, not here
        '{"pwd":"/repo","exit":0}\npwd = "/home/user"\nconst pwd = "~/src";\nenv: {pwd: "/srv"}\n',
        [],
    ),
    case(
        "templates that name where a secret is kept",
        "API_KEY = f\"{KEY_PREFIX}{os.getenv('SUFFIX')}\"\ntoken = f\"Bearer {token}\"\n"
        'password = $"{user}-{host}"\n{"cmd": "password = f\\"{pw}\\""}\n',
        [],
    ),
    case(
        "lists after auth",  # roles and scopes, not a user and a password
        "auth: [\"admin\", \"editor\"]\nAUTH = ['users', 'groups']\n'auth': ['read', 'write'],\n",
        [],
    ),
    case(
        "lockfile integrity and uuids",
        "resolution: {integrity: sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxV"
        "jcXPs17LhbZVGedAJv8XZ1tvj5FvSg==}\nrequest-id: 6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
        [],
    ),
    case(
        "css and fixtures",
        ".password-field { color: red } .token-input {} .api-key-label {}\n"
        "def test_login(password_field, api_key_input):\n    password_field.fill('x')\n"
        "tests/test_auth.py::test_reset[password-too-short] PASSED",
        [],
    ),
    case(
        "placeholders",
        "OPENAI_API_KEY=<YOUR_KEY>\nDB_PASSWORD=${SECRET}\npassword: ${DB_PASSWORD}\n"
        "api_key: '****'\nDB_PASSWORD=********\nToken: ghp_****************************",
        [],
    ),
    case(
        "terraform plan",
        '  + resource "aws_db_instance" "main" {\n'
        "      + password                = (sensitive value)\n"
        "      + master_password         = (known after apply)\n"
        "      + api_token               = (sensitive)\n    }\n"
        "Changes to Outputs:\n  + db_password = (sensitive value)\n",
        [],
    ),
    case(
        "masks that show a key's kind or its last four",
        "aws_secret_access_key ****************ABCD shared-credentials-file\n"
        "OPENAI_API_KEY=sk-proj-****************************ab12\n"
        "Token: gho_************************************\nkey: AKIA************",
        [],
    ),
    case(
        "a base64 image and a certificate",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhf"
        f"DwAChwGA60e6kgAAAABJRU5ErkJggg==\nclient-certificate-data: {CERT_B64}",
        [],
    ),
    case(
        "a line continuation and a folder beside no secret",
        "docker run --rm \\\n  -e LOG_LEVEL=debug \\\n  -v $PWD:/src image:tag\n"
        "#define MAX(a, b) ((a) > (b) ? (a) : (b))\\\n  /* end */\nx = foo\\\nbar\n"
        "cd $PWD && echo $PWD\nPWD=/home/dev\npwd: /home/dev",
        [],
    ),
    case(
        "python auth helpers without a password",
        "r = requests.get(url, auth=auth)\nsession.auth = (user, password)\n"
        'auth=("admin", password)\nauth = HTTPBasicAuth(user, get_password())\n'
        'btoa(user + ":" + password)\nb64encode(f"{user}:{password}".encode())',
        [],
    ),
]


@pytest.mark.parametrize(("text", "_gone", "kept"), LOOKALIKES)
def test_a_lookalike_stays(text: str, _gone: list[str], kept: list[str]) -> None:
    assert_lookalike_kept(text, kept)


ADVERSARIAL = [
    "a\\\n" * 30000,
    "sk-proj-abcdefghijklmnopqrst1\\\n" * 3000,
    "[REDACTED]\\\n" * 9000,
    'auth=("' * 15000,
    'auth=("a", "' * 9000,
    "btoa('" + "a" * 127 + ":" * 2000,
    "CURLOPT_USERPWD, 'a:" * 5000,
    "hunter2*****" * 8000,
    "x" * 12 + "*" * 60000,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: re.sub(r"\W+", "_", t[:16]))
def test_the_forms_are_linear(text: str) -> None:
    assert_linear(text)
