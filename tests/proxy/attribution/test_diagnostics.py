"""Reading the providers' diagnosis shapes (and refusing what is not one), asking for it without
overriding a client's own request, and Anthropic's beta header merged with the client's."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.attribution import diagnostics as d


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ({"diagnostics": {"cache_miss_reason": None}}, {"reason": "no_divergence"}),
        (
            {"diagnostics": {"cache_miss_reason": {"type": "tools_changed",
                                                    "cache_missed_input_tokens": 900}}},
            {"reason": "tools_changed", "missed_tokens": 900},
        ),
        (
            {"diagnostics": {"cache_miss_reason": {"type": "previous_message_not_found"}}},
            {"reason": "previous_message_not_found"},
        ),
        (
            {"prompt_cache_diagnostics": {"type": "cache_miss", "reason": "model_changed",
                                          "cache_missed_tokens": 5000,
                                          "comparison_reusable_tokens": 0}},
            {"reason": "model_changed", "missed_tokens": 5000},
        ),
        ({"prompt_cache_diagnostics": {"type": "cache_hit"}}, {"reason": "cache_hit"}),
        ({"prompt_cache_diagnostics": {"type": "unavailable"}}, {"reason": "unavailable"}),
        # untrusted: a count that is no count is dropped, a long reason clipped
        (
            {"diagnostics": {"cache_miss_reason": {"type": "x" * 500,
                                                    "cache_missed_input_tokens": -4}}},
            {"reason": "x" * d.MAX_TEXT},
        ),
        ({"diagnostics": None}, None),
        ({"prompt_cache_diagnostics": "miss"}, None),
        ({"id": "msg_1"}, None),
        ("not an object", None),
    ],
)  # fmt: skip
def test_the_documented_shapes_are_read(answer: Any, verdict: dict[str, Any] | None) -> None:
    assert d.diagnosis(answer) == verdict


def test_asking_adds_fields_and_keeps_a_clients_own() -> None:
    body = {"model": "claude-x", "messages": []}
    fields = d.request_fields("anthropic", "msg_9")
    assert fields == {"diagnostics": {"previous_message_id": "msg_9"}}
    asked = d.asked(body, fields)
    assert asked == {**body, **fields} and body == {"model": "claude-x", "messages": []}
    assert d.asked({**body, "diagnostics": {"previous_message_id": None}}, fields) is None
    assert d.request_fields("responses", None) is None  # nothing to compare with
    assert d.request_fields("responses", "resp_1") == {
        "prompt_cache_options": {"comparison_response_id": "resp_1"}
    }
    assert d.request_fields("chat", "x") is None


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ({}, d.ANTHROPIC_BETA),
        ({"anthropic-beta": "oauth-2025-04-20"}, f"oauth-2025-04-20, {d.ANTHROPIC_BETA}"),
        ({"anthropic-beta": d.ANTHROPIC_BETA}, d.ANTHROPIC_BETA),
    ],
)
def test_the_beta_header_is_merged(given: dict[str, str], sent: str) -> None:
    assert d.with_beta(given)["anthropic-beta"] == sent


def test_answer_ids_are_short_plain_strings() -> None:
    assert d.response_id({"id": "msg_01abc"}) == "msg_01abc"
    assert d.response_id({"id": "x" * 300}) is None
    assert d.response_id({"id": 7}) is None
