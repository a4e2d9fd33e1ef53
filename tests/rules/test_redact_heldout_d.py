"""Redaction judged on a fourth set of text: connection strings, credential files, signed URLs,
environment dumps and the commands that take a password, as an agent's tools print them, beside
the hashes, ids and placeholders that fill the same output and must stay."""

from __future__ import annotations

import pytest

from tests.support.redaction_cases import (
    b64,
    case,
    held_out_tests,
)

PW = "Vt9#kQ2mLx7w"
GH_FG = (
    "github_pat_11ABCDEFG0a1b2c3d4e5f6_"
    "g7H8i9J0k1L2m3N4o5P6q7R8s9T0u1V2w3X4y5Z6a7B8c9D0e1F2g3H4i5J6k"
)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM_BODY = (
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n"
)
K8S_TOKEN = "eyJhbGciOiJSUzI1NiIsImtpZCI6IkRfdGVzdCJ9.eyJpc3MiOiJrdWJlcm5ldGVzIn0.c2lnbmF0dXJlX3Zh"
HEX64 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

SECRETS = [
    case(
        "connection strings of four stores",
        f"DATABASE_URL=postgres://app:{PW}a@db.internal:5432/app?sslmode=require\n"
        f"mongodb+srv://admin:{PW}b@cluster0.ab1cd.mongodb.net/test?retryWrites=true\n"
        f"redis://:{PW}c@cache.internal:6379/0\n"
        f"amqp://guest:{PW}d@rabbit:5672/%2F\n",
        [PW],
        ["db.internal:5432/app?sslmode=require", "cluster0.ab1cd.mongodb.net", "rabbit:5672"],
    ),
    case(
        "a URL whose user is a key and whose password is its secret",
        f"aws s3 cp s3://AKIAIOSFODNN7EXAMPLE:{PW}a@my-bucket/backup.tar.gz .\n"
        f"git clone https://ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2:{PW}b@github.com/o/r.git\n",
        [PW, "AKIAIOSFODNN7EXAMPLE", "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2"],
        ["@my-bucket/backup.tar.gz", "@github.com/o/r.git"],
    ),
    case(
        "tokens in URLs' queries",
        "GET https://api.example.com/v1/me?access_token=ya29.a0AfH6SMBx7Kq2Lm9Np4Rs&fields=id\n"
        "https://acct.blob.core.windows.net/c/f.txt?sv=2021-08-06&se=2025-01-01T00%3A00%3A00Z"
        "&sr=b&sp=r&sig=Xk2%2Bq9LmN7pR4sT1vW8yZ0aB3cD6eF5gH2iJ4kL7mN0%3D\n"
        "https://bkt.s3.amazonaws.com/o?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        f"&X-Amz-Signature={HEX64}\n",
        ["ya29.a0AfH6SMBx7Kq2Lm9Np4Rs", "Xk2%2Bq9LmN7pR4sT1vW8yZ0aB3cD6eF5gH2iJ4kL7mN0", HEX64],
        ["&fields=id", "X-Amz-Algorithm=AWS4-HMAC-SHA256"],
    ),
    case(
        "a kubeconfig",
        "users:\n- name: admin\n  user:\n"
        f"    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\n"
        f"    client-key-data: {b64('-----BEGIN RSA PRIVATE KEY-----' + PW)}\n"
        f"- name: sa\n  user:\n    token: {K8S_TOKEN}\n",
        [b64("-----BEGIN RSA PRIVATE KEY-----" + PW), K8S_TOKEN],
        ["- name: admin", "client-certificate-data:"],
    ),
    case(
        ".npmrc, .pypirc and a Docker config.json",
        "//registry.npmjs.org/:_authToken=npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8\n"
        "//npm.pkg.github.com/:_authToken=ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2\n"
        "[pypi]\nusername = __token__\n"
        "password = pypi-AgEIcHlwaS5vcmcCJGE0ZjY3YzEwLTk4ZjgtNDU2Ny1iOTc0LWE5ZDg3\n"
        '{"auths": {"https://index.docker.io/v1/": {"auth": "'
        + b64("bob:" + PW)
        + '"}}}\n',
        [
            "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
            "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2",
            "pypi-AgEIcHlwaS5vcmcCJGE0ZjY3YzEwLTk4ZjgtNDU2Ny1iOTc0LWE5ZDg3",
            b64("bob:" + PW),
        ],
        ["username = __token__", "https://index.docker.io/v1/"],
    ),
    case(
        ".netrc and git's credential store",
        f"machine api.heroku.com\n  login me@example.com\n  password {PW}a\n"
        f"machine github.com login octocat password {PW}b\n"
        f"https://octocat:{PW}c@github.com\n",
        [PW],
        ["machine api.heroku.com", "login me@example.com", "@github.com"],
    ),
    case(
        "a private key whole and cut off",
        f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}-----END PRIVATE KEY-----\n"
        f"$ cat id_rsa | head -3\n-----BEGIN OPENSSH PRIVATE KEY-----\n"
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAABlwAAAAdzc2gtcn\n"
        "NhAAAAAwEAAQAAAYEAyz1Xk2Lm9Np4Rs7Tv0Wx3Yz6Ab9Cd2Ef5Gh8Ij1Kl4Mn7Op0Qr3S\n",
        [
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAABlwAAAAdzc2gtcn",
            "NhAAAAAwEAAQAAAYEAyz1Xk2Lm9Np4Rs7Tv0Wx3Yz6Ab9Cd2Ef5Gh8Ij1Kl4Mn7Op0Qr3S",
        ],
        ["$ cat id_rsa | head -3"],
    ),
    case(
        "provider keys in prose and logs",
        f"Using token {GH_FG} for the API\n"
        f"jwt={JWT}\n"
        "export GITLAB_TOKEN=glpat-Ab1Cd2Ef3Gh4Ij5Kl6Mn\n"
        "SLACK_BOT=xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx\n"
        "stripe.api_key = 'sk_live_51Hx2Ab3Cd4Ef5Gh6Ij7Kl8Mn9Op0Qr'\n"
        "rk_live_51Hx2Ab3Cd4Ef5Gh6Ij7Kl8Mn9Op0Qr used for refunds\n"
        "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\n"
        "mailgun: key-3ax6xnjp29jd6fds4gc373sgvjxteol0\n"
        "client = OpenAI(api_key='sk-proj-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3')\n"
        "anthropic key sk-ant-api03-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3-Ab1Cd2AA\n"
        "maps?key=AIzaSyAb1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv\n"
        "VAULT_TOKEN: hvs.CAESIAb1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2\n",
        [
            GH_FG, JWT, "glpat-Ab1Cd2Ef3Gh4Ij5Kl6Mn",
            "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            "sk_live_51Hx2Ab3Cd4Ef5Gh6Ij7Kl8Mn9Op0Qr", "rk_live_51Hx2Ab3Cd4Ef5Gh6Ij7Kl8Mn9Op0Qr",
            "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",
            "key-3ax6xnjp29jd6fds4gc373sgvjxteol0",
            "sk-proj-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3",
            "sk-ant-api03-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3",
            "AIzaSyAb1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv",
            "hvs.CAESIAb1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2",
        ],
        ["for the API", "used for refunds"],
    ),
    case(
        "a GCP service account's JSON",
        '{\n  "type": "service_account",\n  "project_id": "demo-123",\n'
        '  "private_key_id": "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",\n'
        '  "private_key": "-----BEGIN PRIVATE KEY-----\\n'
        + PEM_BODY.replace("\n", "\\n")
        + '-----END PRIVATE KEY-----\\n",\n'
        '  "client_email": "ci@demo-123.iam.gserviceaccount.com"\n}\n',
        ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
         "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"],
        ['"project_id": "demo-123"', "ci@demo-123.iam.gserviceaccount.com"],
    ),
    case(
        "Terraform state",
        '{\n  "resources": [{\n    "type": "aws_db_instance",\n    "instances": [{\n'
        '      "attributes": {\n        "username": "dbadmin",\n'
        f'        "password": "{PW}",\n'
        '        "endpoint": "db.abc.us-east-1.rds.amazonaws.com:5432"\n'
        '      },\n      "sensitive_attributes": []\n    }]\n  }]\n}\n',
        [PW],
        ['"username": "dbadmin"', "db.abc.us-east-1.rds.amazonaws.com:5432"],
    ),
    case(
        "env, printenv and docker inspect",
        f"HOME=/root\nPOSTGRES_PASSWORD={PW}a\nPATH=/usr/bin:/bin\n"
        f"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
        '        "Env": [\n            "MYSQL_ROOT_PASSWORD=' + PW + 'b",\n'
        '            "REDIS_URL=redis://:' + PW + 'c@redis:6379",\n'
        '            "PATH=/usr/local/sbin:/usr/local/bin"\n        ],\n',
        [PW, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"],
        ["HOME=/root", "PATH=/usr/bin:/bin", "PATH=/usr/local/sbin:/usr/local/bin"],
    ),
    case(
        "kubectl get secret -o yaml",
        "apiVersion: v1\ndata:\n"
        f"  password: {b64(PW)}\n  username: {b64('admin')}\n"
        "kind: Secret\nmetadata:\n  name: db-creds\n  namespace: prod\ntype: Opaque\n",
        [b64(PW)],
        ["name: db-creds", "namespace: prod", "type: Opaque"],
    ),
    case(
        "commands given a password",
        f"curl -u admin:{PW}a https://api.example.com/health\n"
        f"mysql -h db -u root -p{PW}b app < dump.sql\n"
        f"PGPASSWORD={PW}c psql -h db -U app\n"
        f"sshpass -p '{PW}d' ssh deploy@10.0.0.5\n",
        [PW],
        ["https://api.example.com/health", "psql -h db -U app", "ssh deploy@10.0.0.5"],
    ),
    case(
        "a key split by a backslash and a newline in a shell command",
        "curl -H 'Authorization: Bearer sk-proj-Ab1Cd2Ef3Gh4Ij5Kl6Mn\\\n"
        "7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5Ef6' https://api.openai.com/v1/models\n",
        ["Ab1Cd2Ef3Gh4Ij5Kl6Mn", "7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5Ef6"],
        ["https://api.openai.com/v1/models"],
    ),
    case(
        "a password given to requests beside its user",
        f'r = requests.get(url, auth=("admin", "{PW}"), timeout=10)\n',
        [PW],
        ["timeout=10"],
    ),
    case(
        "a value shown in part before its mask",
        "DB password: hunter2*****\nPASSWORD=s3cr3tP4ss****\n",
        ["hunter2", "s3cr3tP4ss"],
    ),
    case(
        "an answer's Markdown table of credentials",
        "| Setting | Value |\n|---|---|\n"
        f"| DB password | {PW}a |\n| Admin token | `{PW}b` |\n| Host | db.internal |\n",
        [PW],
        ["| Host | db.internal |", "| DB password | ", "| Admin token | "],
    ),
    case(
        "an answer's Markdown table with a password column",
        "| Service | User | Password | API key |\n|---------|------|:--------:|---|\n"
        f"| Postgres | app | {PW}a | - |\n| Redis | default | `{PW}b` | n/a |\n"
        f"| Grafana | admin | <set-in-ui> | {PW}c |\n\nAll three run on the same host.\n",
        [PW],
        ["| Postgres | app | ", "| Grafana | admin | <set-in-ui> | ", "All three run on"],
    ),
    case(
        "YAML block scalars under a secret's name",
        f"db:\n  password: |\n    {PW}a\n  host: db.internal\n"
        f"smtp:\n  password: >-\n    {PW}b\n    {PW}c\n\n  port: 587\n"
        "tls:\n  private_key: |+\n    MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n"
        "    Us8cKjMzEfYyjiWA4R4M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT\nuser: app\n",
        [PW, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", "Us8cKjMzEfYyjiWA4R4M2b"],
        ["  host: db.internal", "  port: 587", "user: app", "password: ", "private_key: "],
    ),
    case(
        "a Terraform variable's default",
        f'variable "db_password" {{\n  type      = string\n  default   = "{PW}"\n'
        '  sensitive = true\n}\nvariable "region" {\n  default = "us-east-1"\n}\n'
        'output "db_password" {\n  value     = aws_db_instance.main.password\n}\n',
        [PW],
        ["  type      = string", 'default = "us-east-1"', "= aws_db_instance.main.password"],
    ),
    case(
        "XML elements that name a secret beside its value",
        "<configuration>\n  <property>\n    <name>fs.s3a.secret.key</name>\n"
        f"    <value>{PW}abcd</value>\n  </property>\n  <property>\n"
        "    <name>javax.jdo.option.ConnectionPassword</name>\n"
        f"    <value>{PW}</value>\n  </property>\n  <property>\n"
        "    <name>hive.metastore.uris</name>\n    <value>thrift://meta:9083</value>\n"
        f'  </property>\n</configuration>\n<entry key="db.password">{PW}</entry>\n'
        f'<setting name="ApiKey" serializeAs="String">\n  <value>{PW}efgh</value>\n</setting>\n',
        [PW],
        ["<value>thrift://meta:9083</value>", "<name>fs.s3a.secret.key</name>"],
    ),
    case(
        "terraform output -json and composer's auth.json: a secret name holding an object",
        '{\n  "db_password": {\n    "sensitive": true,\n    "type": "string",\n'
        f'    "value": "{PW}a"\n  }},\n  "endpoint": {{"value": "db.internal"}}\n}}\n'
        f'{{"gitlab-token": {{"gitlab.example.com": "{PW}b"}}}}\n',
        [PW],
        ['"db_password": {\n    "sensitive": true,\n    "type": "string",', '"db.internal"',
         '{"gitlab-token": {"gitlab.example.com": "'],
    ),
]

LOOKALIKES = [
    case(
        "hashes, digests and ids in tool output",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b\n"
        f"sha256:{HEX64}\n"
        '"integrity": "sha512-9v+fV1sY2nTq5Zx8rY7QnR2m1xjPq3kLw4uO0e9aB6cD5fG8hI7jK2lM3nO4pQ5rS'
        '6tU7vW8xY9zA0bC1dE2fF=="\n'
        "request_id=550e8400-e29b-41d4-a716-446655440000\n"
        "img = 'data:image/png;base64,"
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk'\n",
        [],
    ),
    case(
        "CSS, fixtures and placeholders",
        '<input class="form-control password_field" type="password">\n'
        "def test_password_field_is_required(password_field):\n"
        "export OPENAI_API_KEY=<YOUR_KEY>\n"
        'api_key: "${SECRET}"\n'
        "password: ****\n"
        "token: ${{ secrets.NPM_TOKEN }}\n",
        [],
    ),
    case(
        "code the agent reads",
        "    token_count = len(tokens)\n    secret_name = f\"projects/{pid}/secrets/{name}\"\n"
        "    password_hash = make_password(raw)\n"
        "auth=(\"admin\", password)\n"
        "const apiKeyHeader = 'x-api-key';\n",
        [],
    ),
    case(
        "a table documenting an API's fields",
        "| Field | Type | Description |\n|-------|------|-------------|\n"
        "| password | string | The user's password |\n| token | Optional[str] | A session token |\n"
        "| api_key | `str` | Required |\n",
        [],
    ),
    case(
        "tables of columns named like secrets that hold no secret",
        "| Model | Max tokens | Token | Secret |\n|---|---|---|---|\n"
        "| gpt-4o | 128000 | string | yes |\n| claude | 200000 | `str` | no |\n"
        "| Name | Password |\n| --- | --- |\n| admin | ******** |\n| ci | $CI_PASSWORD |\n",
        [],
    ),
    case(
        "YAML block scalars that hold no secret",
        "description: |\n  Set the password in the UI.\n"
        "password_policy: >\n  At least 12 characters.\n"
        "password: |\n\ntoken: ${GITHUB_TOKEN}\n",
        [],
    ),
    case(
        "XML elements naming a secret with no secret in them",
        "<property><name>ssl.keystore.password</name><value>${env.KEYSTORE_PASS}</value>"
        '</property>\n<entry key="password.min.length">12</entry>\n'
        '<entry key="token">abc</entry>\n<setting name="Theme"><value>dark</value></setting>\n',
        [],
    ),
    case(
        "a schema describing a password field",
        '"password": {"type": "string", "format": "password", "minLength": 8,'
        ' "description": "The user\'s password"}\n'
        "password: { type: String, required: true, select: false },\n",
        [],
    ),
]

ADVERSARIAL: list[object] = [
    pytest.param("postgres://" + "u:" * 50_000 + "@", id="a URL's user of many colons"),
    pytest.param("?access_token=" + "&a" * 50_000, id="query pairs in a row"),
    pytest.param("machine a login b password " * 5_000, id="netrc entries in a row"),
    pytest.param("-----BEGIN PRIVATE KEY-----\n" * 5_000, id="key headers in a row"),
    pytest.param("auth=(\"a\", " * 20_000, id="auth tuples opened in a row"),
    pytest.param("x" + "*" * 100_000, id="a long mask"),
    pytest.param('"password": {' * 4_000, id="objects opened in a row"),
    pytest.param("| password | " * 4_000, id="table cells in a row"),
    pytest.param("<name>password</name> " * 4_000, id="XML names with no value"),
    pytest.param('<a key="password">' * 4_000, id="XML elements not closed"),
    pytest.param("password: |\n" * 4_000, id="block scalars in a row"),
    pytest.param("a:\n  password: |\n" + "   x\n" * 30_000, id="a long block"),
    pytest.param("| Password |\n|---|\n" + "| a1! |\n" * 20_000, id="a password column's rows"),
    pytest.param("| Password |\n|---|\n" * 4_000, id="tables in a row"),
    pytest.param("| Password |\n|---|\n|" + "x" * 100_000, id="a row past its bound"),
    pytest.param("| password |" + " " * 60_000 + "x", id="a table cell of blanks"),
    pytest.param('"password": {' + '"a": "b", ' * 8_000, id="an object with many fields"),
]


test_secrets_go, test_lookalikes_stay, test_linear = held_out_tests(
    SECRETS, LOOKALIKES, ADVERSARIAL
)
