from __future__ import annotations

from typing import Any

import pytest

from proxy.rewrite.output_reserve import input_budget, requested_output


@pytest.mark.parametrize(
    ("body", "asked"),
    [
        ({"max_tokens": 32000}, 32000),  # Anthropic Messages, chat
        ({"max_completion_tokens": 4000, "max_tokens": 9}, 4000),  # chat's newer name wins
        ({"max_output_tokens": 128000}, 128000),  # Responses
        ({"max_tokens": True}, None),
        ({"max_tokens": "32000"}, None),
        ({"max_tokens": 0}, None),
        ({}, None),
    ],
)
def test_the_output_a_request_asks_for(body: dict[str, Any], asked: int | None) -> None:
    assert requested_output(body) == asked


def test_the_budget_leaves_room_for_the_larger_of_reserve_and_request() -> None:
    assert input_budget(200_000, 8_000, {"max_tokens": 32_000}) == 168_000
    assert input_budget(200_000, 8_000, {"max_tokens": 1_000}) == 192_000
    assert input_budget(200_000, 8_000, {}) == 192_000
    assert input_budget(10_000, 8_000, {"max_tokens": 64_000}) == 256  # the floor
