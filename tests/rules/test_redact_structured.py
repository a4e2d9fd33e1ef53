"""Secrets a JSON value holds by its structure: a secret's name in one field and its value in
another (an env list, a HAR's headers, CloudFormation's parameters), and a command's words as a
list. The texts' net read both as strings; as JSON the value kept its secret."""

from __future__ import annotations

from typing import Any

import pytest

from rules.redact import REDACTED, redact

SECRET = "Sup3rS3cret9x"


@pytest.mark.parametrize(
    ("pair", "named", "held"),
    [
        ({"name": "DB_PASSWORD", "value": SECRET}, "name", "value"),
        ({"name": "X-Api-Key", "value": SECRET}, "name", "value"),  # a HAR's header
        ({"Name": "GITHUB_TOKEN", "Value": SECRET}, "Name", "Value"),
        ({"ParameterKey": "DbPassword", "ParameterValue": SECRET},
         "ParameterKey", "ParameterValue"),
        ({"key": "API_KEY", "value": SECRET}, "key", "value"),  # "key" names the secret here
    ],
)  # fmt: skip
def test_a_value_named_by_its_sibling_goes_and_the_name_stays(
    pair: dict[str, Any], named: str, held: str
) -> None:
    out = redact({"env": [pair, {"name": "HOME", "value": "/root"}]})
    assert out["env"][0] == {**pair, named: pair[named], held: REDACTED}
    assert list(out["env"][0]) == list(pair)  # the fields' order kept
    assert out["env"][1] == {"name": "HOME", "value": "/root"}


@pytest.mark.parametrize(
    "pair",
    [
        {"name": "PATH", "value": "/usr/bin"},
        {"name": "token", "value": 5},  # a count, as a field named so keeps it
        {"name": "password", "label": SECRET},  # no value field
    ],
)
def test_other_pairs_stay(pair: dict[str, Any]) -> None:
    assert redact(pair) == pair


@pytest.mark.parametrize(
    ("words", "after"),
    [
        (["mysql", "-u", "root", f"-p{SECRET}"], ["mysql", "-u", "root", f"-p{REDACTED}"]),
        (["mysql", "--password", SECRET], ["mysql", "--password", REDACTED]),
        (["curl", "-u", f"admin:{SECRET}", "https://x"],
         ["curl", "-u", f"admin:{REDACTED}", "https://x"]),
        (["sshpass", "-p", SECRET, "ssh", "host"], ["sshpass", "-p", REDACTED, "ssh", "host"]),
    ],
)  # fmt: skip
def test_a_commands_words_are_read_as_its_line(words: list[str], after: list[str]) -> None:
    assert redact({"argv": words}) == {"argv": after}


@pytest.mark.parametrize(
    "words",
    [
        ["git", "log", "-n", "3"],  # no secret
        ["a1b2c3d4e5f6a7b8", "c1d2e3f4a5b6c7d8"],  # no flag: hashes, names
        ["echo", "-n", "a b"],  # a word with a blank: each word alone
    ],
)
def test_other_lists_stay(words: list[str]) -> None:
    assert redact(words) == words
