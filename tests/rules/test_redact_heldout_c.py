"""Redaction judged on a third set of text: secrets printed alone by the command that read them
from a store, servers' own config directives (Redis, wpa_supplicant, WordPress), and the
placeholders and Markdown beside them that must reach the store as they were."""

from __future__ import annotations

import pytest

from tests.support.redaction_cases import (
    assert_linear,
    assert_lookalike_kept,
    assert_secrets_gone,
    case,
)

PW = "Zq8#vLp2mWx4"
SALT = "x7#Lq!m2@Vz$9pR&kT^wB*3nF(eH)jY+uC-sG=dN[aK]"

# (text, what must not survive, what must)
SECRETS: list[object] = []

# (text, what must stay)
LOOKALIKES = [
    case(
        "placeholders in a README's setup",
        "export OPENAI_API_KEY=your-api-key-here\n"
        'api_key = "YOUR_API_KEY"\n'
        "Authorization: Bearer YOUR_TOKEN\n"
        "GITHUB_TOKEN=xxxxxxxxxxxxxxxxxxxx\n"
        '"password": "your_password"\n'
        "export HF_TOKEN=paste-your-token-here\n",
        [],
    ),
]

# adversarial inputs, each redacted in linear time
ADVERSARIAL: list[object] = [
    pytest.param("api_key=your-" + "a-" * 50_000, id="a placeholder's words repeated"),
    pytest.param("password=" + "x" * 100_000 + "1", id="an x-run that is not all x"),
]


@pytest.mark.parametrize(("text", "gone", "kept"), SECRETS)
def test_secrets_go(text: str, gone: list[str], kept: list[str]) -> None:
    assert_secrets_gone(text, gone, kept)


@pytest.mark.parametrize(("text", "kept", "_unused"), LOOKALIKES)
def test_lookalikes_stay(text: str, kept: list[str], _unused: list[str]) -> None:
    assert_lookalike_kept(text, kept)


@pytest.mark.parametrize("text", ADVERSARIAL)
def test_linear(text: str) -> None:
    assert_linear(text)
