"""The held-out redaction sets' cases and checks: a text whose secrets must go (and what must
stay beside them), a look-alike that must stay whole, and a form that must redact in linear
time."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest

from rules.redact import REDACTED, redact_text
from tests.support.cpu_clock import cpu_timer


def b64(raw: str) -> str:
    return base64.b64encode(raw.encode()).decode()


def case(name: str, text: str, gone: list[str], kept: list[str] | None = None) -> object:
    """A parameter: ``text``, what must not survive redaction, what must."""
    return pytest.param(text, gone, kept or [], id=name)


def assert_secrets_gone(text: str, gone: list[str], kept: list[str]) -> None:
    out = redact_text(text)
    assert [s for s in gone if s in out] == []
    assert [k for k in kept if k not in out] == []
    assert REDACTED in out
    assert redact_text(out) == out


def assert_lookalike_kept(text: str, kept: list[str]) -> None:
    """``kept`` survives; all of ``text`` when it is empty."""
    out = redact_text(text)
    if kept:
        assert [k for k in kept if k not in out] == []
    else:
        assert out == text


def assert_linear(text: str) -> None:
    with cpu_timer() as took:
        out = redact_text(text)
    assert took.seconds < 0.25, f"{took.seconds:.3f} s on {len(text)} characters"
    assert redact_text(out) == out


def held_out_tests(
    secrets: list[object], lookalikes: list[object], adversarial: list[object]
) -> tuple[Callable[..., None], Callable[..., None], Callable[..., None]]:
    """A held-out set's three tests, for its module to name: its secrets go, its look-alikes
    stay, its adversarial forms redact in linear time."""

    @pytest.mark.parametrize(("text", "gone", "kept"), secrets)
    def test_secrets_go(text: str, gone: list[str], kept: list[str]) -> None:
        assert_secrets_gone(text, gone, kept)

    @pytest.mark.parametrize(("text", "kept", "_unused"), lookalikes)
    def test_lookalikes_stay(text: str, kept: list[str], _unused: list[str]) -> None:
        assert_lookalike_kept(text, kept)

    @pytest.mark.parametrize("text", adversarial)
    def test_linear(text: str) -> None:
        assert_linear(text)

    return test_secrets_go, test_lookalikes_stay, test_linear
