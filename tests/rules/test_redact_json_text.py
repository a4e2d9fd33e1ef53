"""A JSON text (a tool call's arguments) is redacted as its decoded strings are: every held-out
set's secrets, written into a file by a call, go; the text keeps its bytes but for the strings
that changed; and a text nested past what can be walked is left to the patterns."""

from __future__ import annotations

import json

import pytest

from rules.redact import REDACTED, redact_text
from tests.rules import (
    test_redact_heldout,
    test_redact_heldout_b,
    test_redact_heldout_c,
    test_redact_heldout_d,
    test_redact_heldout_e,
)
from tests.support.cpu_clock import cpu_timer

_SETS = (
    test_redact_heldout,
    test_redact_heldout_b,
    test_redact_heldout_c,
    test_redact_heldout_d,
    test_redact_heldout_e,
)
CASES = [
    pytest.param(p.values[0], p.values[1], id=f"{s.__name__.rpartition('_')[2]}: {p.id}")
    for s in _SETS
    for p in s.SECRETS
]


@pytest.mark.parametrize(("text", "gone"), CASES)
def test_secrets_in_a_calls_arguments_go(text: str, gone: list[str]) -> None:
    arguments = json.dumps({"path": "notes.txt", "content": text})
    out = redact_text(arguments)
    assert [g for g in gone if g in out or json.dumps(g)[1:-1] in out] == []
    assert json.loads(out)["path"] == "notes.txt"
    assert redact_text(out) == out


def test_only_the_strings_that_changed_change() -> None:
    text = (
        '{\n  "path": "a.yml",\n  "mode": "w",\n'
        '  "content": "db:\\n  password:\\n    hunter2\\n"\n}'
    )
    out = redact_text(text)
    assert out == text.replace("hunter2", REDACTED)


def test_a_json_text_with_no_secret_keeps_its_bytes() -> None:
    text = '{"a": "x\\u00e9\\/y", "b": [1, 2.50, true], "c": "line\\nnext"}'
    assert redact_text(text) == text


def test_a_secret_field_holding_an_object_is_encoded_again() -> None:
    text = '{"password": {"v": "hunter2\\n"}, "user": "bob"}'
    out = redact_text(text)
    assert "hunter2" not in out
    assert json.loads(out)["user"] == "bob"


def test_nesting_past_the_walk_is_left_to_the_patterns() -> None:
    deep = "[" * 100_000 + '"password: hunter2\\n"' + "]" * 100_000
    out = redact_text(deep)
    assert "hunter2" not in out


def test_many_changed_strings_are_encoded_whole() -> None:
    text = json.dumps([f"password:\n  hunter{i}x\n" for i in range(500)])
    out = redact_text(text)
    assert "hunter1x" not in out
    assert len(json.loads(out)) == 500


def test_a_json_text_of_many_escaped_strings_is_left_to_the_patterns_in_bounded_time() -> None:
    text = json.dumps([f"line {i}\nmore" for i in range(20_000)])
    with cpu_timer() as took:
        assert redact_text(text) == text
    assert took.seconds < 0.25


def test_a_changed_string_is_put_back_only_where_it_is_a_string() -> None:
    """A string's written form can also end another string (``"say \\"`` then its text): put
    back by a replace of the text, the other string, which held nothing its own reading
    redacts, changed too. Only the changed string's own places change now."""
    from rules.redact_json_text import redact_json_text

    def first_line_blank(s: str) -> str:  # a reading that depends on where the text starts
        return s.replace("S", "R") if s.startswith("\n") else s

    text = json.dumps({"a": 'say "\nS', "b": "\nS"})
    assert json.loads(redact_json_text(text, first_line_blank)) == {"a": 'say "\nS', "b": "\nR"}
