"""Passwords given to the tools that take them in their own way: an archiver's ``-P``/``-p``,
``openssl enc -k``, Oracle's ``user/SECRET@db``, MongoDB's attached ``-pSECRET``, ``mysqladmin
password``, ``rclone config``'s pairs, ``useradd -p``, RDP clients, ``vault login TOKEN``, a
password piped into ``sudo -S``, ``--password-stdin``, ``chpasswd`` or ``passwd --stdin``, one
said in prose ("the password for admin is …"), a Dockerfile's ``ENV NAME value`` (fish's ``set
-x``, csh's ``setenv``), PowerShell's ``SetEnvironmentVariable`` and ``ConvertTo-SecureString``,
a Kubernetes Secret's data and a PuTTY key file. Each was stored as written. Their lookalikes
stay, and texts dense in them are redacted in bounded time."""

from __future__ import annotations

import pytest

from rules.redact import REDACTED, redact_text
from tests.support.cpu_clock import cpu_timer

SECRET = "Zq8mN2pLx1"

FORMS = {
    "zip": f"zip -P {SECRET} out.zip a.txt",
    "unzip": f"unzip -P {SECRET} out.zip",
    "7z": f"7z a -p{SECRET} x.7z dir",
    "openssl-k": f"openssl enc -aes256 -in a -out b -k {SECRET}",
    "sqlplus": f"sqlplus scott/{SECRET}@orcl @run.sql",
    "expdp": f"expdp system/{SECRET} schemas=hr",
    "mongo-attached": f"mongo -u admin -p{SECRET} --authenticationDatabase admin",
    "mysqladmin": f"mysqladmin -u root password {SECRET}",
    "rclone": f"rclone config create r s3 access_key_id AK secret_access_key {SECRET}",
    "useradd": f"useradd -m -p {SECRET} bob",
    "xfreerdp": f"xfreerdp /u:bob /p:{SECRET} /v:10.0.0.5",
    "rdesktop": f"rdesktop -u bob -p {SECRET} 10.0.0.5",
    "vault": f"vault login s.{SECRET}",
    "sudo-S": f"echo {SECRET} | sudo -S apt-get install -y jq",
    "password-stdin": f"echo '{SECRET}' | docker login -u me --password-stdin ghcr.io",
    "chpasswd": f'echo "bob:{SECRET}" | chpasswd',
    "passwd-stdin": f"printf '%s\\n' {SECRET} | passwd --stdin bob",
    "prose-for": f"the password for admin is {SECRET}",
    "prose-colon": f"password for root: {SECRET}",
    "dockerfile-env": f"FROM python:3.12\nENV DB_PASSWORD {SECRET}\nRUN pip install x",
    "fish-set-x": f"set -x GITHUB_TOKEN {SECRET}abcdef",
    "fish-set-gx": f"echo ok; set -gx DB_PASSWORD {SECRET}",
    "fish-export-long": f"set --export --global OPENAI_API_KEY {SECRET}abcdef",
    "csh-setenv": f"setenv DB_PASSWORD {SECRET}",
    "ps-set-variable": f"[Environment]::SetEnvironmentVariable('DB_PASSWORD','{SECRET}','User')",
    "ps-secure-string": f"$pw = ConvertTo-SecureString '{SECRET}' -AsPlainText -Force",
    "ps-secure-string-named": f'ConvertTo-SecureString -String "{SECRET}" -AsPlainText -Force',
    "k8s-secret-yaml": "apiVersion: v1\ndata:\n  DATABASE_URL: "
    f"{SECRET}cG9zdGdyZXM=\nkind: Secret\nmetadata:\n  name: app\n",
    "k8s-secret-json": f'{{"data": {{"API_ENDPOINT": "{SECRET}aHR0cA=="}}, "kind": "Secret"}}',
    "k8s-secret-stringdata": f"kind: Secret\nstringData:\n  config.ini: '{SECRET}'\n",
    "kubectl-from-literal": f"kubectl create secret generic db --from-literal=api={SECRET}",
    "kubectl-ns-from-literal": "kubectl -n prod create secret generic db "
    f"--from-literal=username=admin --from-literal 'dsn=postgres://db/app?p={SECRET}'",
    "kubectl-quoted-literal": f'kubectl create secret generic x --from-literal="c={SECRET} x"',
    "mosquitto": f"mosquitto_pub -h broker -u iot -P {SECRET} -t t -m on",
    "lftp": f"lftp -u admin,{SECRET} ftp.example.com",
    "ppk": "PuTTY-User-Key-File-2: ssh-rsa\nPublic-Lines: 1\nAAAAB3Nza\n"
    f"Private-Lines: 2\nAAAAgQCs{SECRET}\nAAAAQQD\nPrivate-MAC: 8f3a9c2e41d84b6f9a0c\n",
}


@pytest.mark.parametrize("text", list(FORMS.values()), ids=list(FORMS))
def test_each_form_loses_the_password(text: str) -> None:
    out = redact_text(text)
    assert SECRET not in out and REDACTED in out, out
    if "Private-MAC" in text:
        assert "8f3a9c2e" not in out


@pytest.mark.parametrize(
    "text",
    [
        "zip -r out.zip src", "gzip -P 3 x", "7z a x.7z dir", "7z x -p x.7z",
        "openssl genrsa -out k.pem 2048", "sqlplus / as sysdba", "sqlplus -s @script.sql",
        "mongo --port 27017 db", "mysqladmin -u root status", "useradd -m bob",
        "rclone config create r s3 provider AWS", "vault login -method=userpass username=bob",
        "echo hello | grep h", "echo done | sudo tee /etc/motd", "echo $PASS | sudo -S ls",
        "the password is too short", "the password for this account is stored in vault",
        "ENV PATH /usr/local/bin", "ENV PASSWORD_RESET_TIMEOUT 3600",
        "Public-Lines: 6\nAAAAB3NzaC1yc2E", "Private-Hash: deprecated since v3",
        "see Private-MAC: field in the docs", "sqlplus -L hr@localhost/XEPDB1 @setup.sql",
        "sqlplus scott@//db.example.com:1521/ORCLPDB1", "sqlplus -S @scripts/create.sql",
        "impdp parfile=/home/oracle/import.par",
        "echo ${{ secrets.GHCR_PAT }} | docker login ghcr.io -u me --password-stdin",
        "echo `cat token.txt` | docker login -u me --password-stdin",
        "set -x PATH /usr/local/bin $PATH", "set -e GITHUB_TOKEN", "setenv EDITOR vim",
        "ConvertTo-SecureString $plain -AsPlainText -Force",
        "[Environment]::SetEnvironmentVariable('PATH','C:/bin','User')",
        "apiVersion: v1\ndata:\n  LOG_LEVEL: debug\nkind: ConfigMap\n",
        '{"data": {"LOG_LEVEL": "debug"}, "kind": "ConfigMap"}',
        "kubectl create configmap app --from-literal=LOG_LEVEL=debug",
        "kubectl create secret generic tls --from-file=tls.crt=./cert.pem",
        "mosquitto_sub -h broker -p 1883 -t '#'", "lftp -u admin ftp.example.com",
    ],
)  # fmt: skip
def test_lookalikes_stay(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    "block",
    ["echo x | sudo -S ", "echo 'a' ", "sqlplus a/", "Private-Lines: 1\nAAAA", "ENV A ",
     "password for x: ", "mongo -pX ", "rclone config create password ", "set -x A ",
     "kind: Secret\ndata:\n  a: b\n", '"data": {"a": "b", ', "ConvertTo-SecureString '",
     "kubectl create secret --from-literal=a=", "mosquitto_pub -P ", "lftp -u a,"],
)  # fmt: skip
def test_a_text_dense_in_these_forms_is_redacted_in_bounded_time(block: str) -> None:
    text = (block * (64 * 1024 // len(block) + 1))[: 64 * 1024]
    with cpu_timer() as took:
        redact_text(text)
    assert took.seconds < 0.25
