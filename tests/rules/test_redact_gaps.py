"""Secrets in forms the nets read short: a YAML value on the line below its name, a URL's
password holding a ``/``, yarn's ``npmAuthIdent``, a password echoed into a file or through a
process substitution, ``oc create secret``'s literals, an HTTP Digest header's parameters.
Each beside what looks like it and must stay."""

from __future__ import annotations

import json

import pytest

from rules.redact import REDACTED, redact_text

PW = "hunter2xyz"


def _gone(text: str, secret: str = PW) -> str:
    out = redact_text(text)
    assert secret not in out, out
    assert REDACTED in out
    assert redact_text(out) == out
    return out


@pytest.mark.parametrize(
    "text",
    [
        f"password:\n  {PW}\n",
        f"db:\n  password:\n    {PW}\n  user: bob\n",
        f"- name: db\n  db_password:\n     '{PW}'\n",
        f"spring:\n  datasource:\n    password:\r\n      {PW}\r\n",
    ],
)
def test_yaml_value_on_the_next_line_goes(text: str) -> None:
    out = _gone(text)
    assert "password:" in out


@pytest.mark.parametrize(
    "text",
    [
        "password:\n  type: string\n  format: password\n",
        "password:\nuser: bob\n",
        "password:\n  ${DB_PASSWORD}\n",
        "if password:\n    return\n",
        "token:\n  - a\n  - b\n",
        "password:\n  first\n  second line\n",
    ],
)
def test_yaml_lookalikes_on_the_next_line_stay(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("git clone https://bob:p4ss/w0rd@gitlab.com/o/r.git", "@gitlab.com/o/r.git"),
        ("postgres://app:p@ss/w0rd@db.internal:5432/app", "@db.internal:5432/app"),
        ("mysql://root:Tr0ub4dor/&3@localhost/db", "@localhost/db"),
    ],
)
def test_url_password_with_a_slash_goes(text: str, kept: str) -> None:
    out = redact_text(text)
    assert out.endswith(kept), out
    assert "w0rd" not in out and "Tr0ub" not in out and "ss/" not in out, out


@pytest.mark.parametrize(
    "text",
    [
        "https://registry.npmjs.org:443/@babel/core",
        "http://localhost:3000/users/@alice",
        "https://example.com/a:b/c@d",
        "https://user:pw@host.example.com/path/@scope/pkg",
        "https://user:pw@localhost:8080/login?next=/a@b",
    ],
)
def test_url_paths_with_an_at_keep_their_host(text: str) -> None:
    out = redact_text(text)
    assert out == text or out == text.replace(":pw@", f":{REDACTED}@"), out


def test_npm_auth_ident_goes() -> None:
    _gone(f'npmAuthIdent: "admin:{PW}"')
    _gone(f"npmAuthIdent = admin:{PW}")
    _gone('{"npmAuthIdent": "admin:' + PW + '"}')
    assert redact_text("npmAuthIdent: ${NPM_AUTH_IDENT}") == "npmAuthIdent: ${NPM_AUTH_IDENT}"


@pytest.mark.parametrize(
    "text",
    [
        f'echo "{PW}" > ~/.vault_pass',
        f"echo -n '{PW}' > /run/secrets/db_password",
        f"printf '%s' {PW} >> pw.txt",
        f"ansible-playbook site.yml --vault-password-file <(echo {PW})",
        f"sshpass -f <(echo '{PW}') ssh admin@host",
        f"restic backup --password-file=<(printf '%s' {PW}) /data",
    ],
)
def test_password_echoed_into_a_file_goes(text: str) -> None:
    _gone(text)


@pytest.mark.parametrize(
    "text",
    [
        'echo "$DB_PASSWORD" > /tmp/pw.txt',
        "echo hello > notes.txt",
        "echo 'export PATH=$PATH:/x' >> ~/.bashrc",
        "diff <(echo a) <(echo b)",
        "ansible-playbook site.yml --vault-password-file ~/.vault_pass",
    ],
)
def test_echo_lookalikes_stay(text: str) -> None:
    assert redact_text(text) == text


def test_oc_create_secret_literals_go() -> None:
    out = _gone("oc create secret generic db --from-literal=api=s3cr3tPw1", "s3cr3tPw1")
    assert "--from-literal=api=" in out
    text = "oc create configmap cfg --from-literal=mode=fast1"
    assert redact_text(text) == text


def test_digest_authorization_parameters_go() -> None:
    response = "6629fae49393a05397450978507c4ef1"
    header = (
        'Authorization: Digest username="alice", realm="x", nonce="dcd98b71", '
        f'uri="/a", response="{response}", opaque="5ccc069c"'
    )
    out = redact_text(header)
    assert response not in out and "alice" not in out, out
    assert redact_text(out) == out
    quoted = '"Authorization": "Digest username=\\"alice\\", response=\\"' + response + '\\""'
    out = redact_text(quoted)
    assert response not in out and "alice" not in out, out
    assert out.endswith('"') and redact_text(out) == out
    challenge = 'WWW-Authenticate: Digest realm="x", qop="auth", nonce="dcd98b7102dd2f0e8b11d0f6"'
    assert redact_text(challenge) == challenge


@pytest.mark.parametrize(
    "text",
    [
        f"db:\n  password:\n    {PW}\n  user: bob\n",
        f'chpasswd <<< "bob:{PW}"',
        f'sudo -S true <<< "{PW}"',
        f'echo "{PW}" > ~/.vault_pass',
        f'ansible-playbook x.yml --vault-password-file <(echo "{PW}")',
        f'printf "{PW}" | gh secret set DB_PASSWORD',
        f'echo "{PW}" | docker login -u bob --password-stdin',
        f'echo "{PW}" | sudo -S true',
        f'#define API_TOKEN "{PW}abcdef"\n',
        f'const API_KEY: &str = "{PW}abcdef";',
        f'DB_PASSWORD ?= "{PW}"\n',
    ],
)
def test_forms_inside_a_json_string_go(text: str) -> None:
    """A tool call's arguments are a JSON text: its quotes and line breaks are escaped."""
    encoded = json.dumps({"command": text})
    out = redact_text(encoded)
    assert PW not in out, out
    assert json.loads(out)["command"].count(REDACTED) == 1, out
