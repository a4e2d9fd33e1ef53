"""A call's arguments as the rules read them (``observations.load_arguments``): whatever a client
sends in the string, an object or {} comes back, and nothing raises."""

from __future__ import annotations

import pytest

from rules.activity.observations import classify, load_arguments

DEEP = "[" * 1_500 + "]" * 1_500  # past orjson's 1,024 levels


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param('{"path": "a.py"}', {"path": "a.py"}, id="object"),
        pytest.param('{"note": "\\udcff"}', {"note": "\udcff"}, id="lone-surrogate"),
        pytest.param('{"a": ' + DEEP + "}", {}, id="nested-past-orjson"),
        pytest.param("[" * 200_000, {}, id="unclosed-and-deep"),
        pytest.param("[1, 2]", {}, id="not-an-object"),
        pytest.param("", {}, id="empty"),
    ],
)
def test_arguments_are_an_object_or_empty(arguments: str, expected: dict[str, object]) -> None:
    assert load_arguments(arguments) == expected


def test_a_call_nested_past_what_the_parsers_read_is_classified_without_its_arguments() -> None:
    action = classify("str_replace_editor", '{"command": "view", "path": ' + DEEP + "}")
    assert action.kind == "other" and action.target == ""
