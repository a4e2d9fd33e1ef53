"""A program named as the maker of a thing ("the bucket terraform created", "den Bucket, den
Terraform angelegt hat", "le bucket que terraform vient de créer"): any actor, narrowed to what
that program made. Before, such a phrase was no mention in any language; and a program alone
that makes no files ("the folder terraform created") must not point at a folder mkdir made."""

from __future__ import annotations

import pytest

from tests.support.scenarios import Scenario, run

APPLY = {
    "shell": "terraform apply -auto-approve",
    "output": "aws_s3_bucket.assets: Creating...\n"
    "aws_s3_bucket.assets: Creation complete after 2s [id=acme-assets-prod]\n\n"
    "Apply complete! Resources: 1 added, 0 changed, 0 destroyed.",
}
MKDIR = {"shell": "mkdir -p modules/net", "output": ""}


@pytest.mark.parametrize(
    ("lang", "ask"),
    [
        ("en", "delete the bucket terraform just created"),
        ("en", "delete the bucket that terraform created"),
        ("en", "delete the bucket created by terraform"),
        ("de", "Lösch den Bucket, den Terraform gerade angelegt hat"),
        ("fr", "supprime le bucket que terraform vient de créer"),
        ("es", "borra el bucket que terraform acaba de crear"),
    ],
)
def test_a_program_named_as_the_maker_points_at_what_it_made(lang: str, ask: str) -> None:
    sc = Scenario("t", lang, "non_file", "/home/dev/infra", (MKDIR, APPLY), ask,
                  {"kind": "bucket", "id": "acme-assets-prod"})  # fmt: skip
    outcome = run(sc)
    assert outcome.passed, outcome.describe()


@pytest.mark.parametrize(
    ("lang", "ask"),
    [
        ("en", "delete the folder terraform just created"),
        ("en", "delete the folder created by terraform"),
        ("de", "Lösch den Ordner, den Terraform gerade angelegt hat"),
    ],
)
def test_a_program_that_makes_no_files_made_no_folder(lang: str, ask: str) -> None:
    sc = Scenario("t", lang, "abstain", "/home/dev/infra", (MKDIR, APPLY), ask, {"abstain": True})
    outcome = run(sc)
    assert outcome.passed, outcome.describe()


def test_a_program_that_writes_files_made_its_file() -> None:
    keygen = {
        "shell": "openssl req -x509 -newkey rsa:2048 -nodes -keyout tls/dev.key -out tls/dev.crt"
        " -days 30 -subj /CN=localhost",
        "output": "-----",
    }
    sc = Scenario("t", "en", "file", "/home/dev/app", (MKDIR, keygen),
                  "show me the certificate openssl just generated",
                  {"path": "/home/dev/app/tls/dev.crt"})  # fmt: skip
    outcome = run(sc)
    assert outcome.passed, outcome.describe()
