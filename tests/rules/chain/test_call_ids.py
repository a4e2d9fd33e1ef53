"""Each upstream's rule for tool-call ids: an id it accepts is forwarded as the client sent it,
one it refuses becomes the nearest id it accepts, the same on every request, and the results
follow their call."""

from __future__ import annotations

from typing import Any

import pytest

from rules.chain.call_ids import RULES, rule_named
from rules.chain.repairs import repair_messages
from rules.chain.validator import find_violations
from tests.support.factories import assistant, result, user

VLLM = "chatcmpl-tool-" + "0123456789abcdef" * 2  # 46 characters, as vLLM makes them
SIGNED = "call_9f2c__thought__CiQBjz1rX+Yq/0Zx7d1Pk9sVwG0cJ3uQhL8aT2mN5bRfE4yW6oA=="


def _calls(*ids: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [user("fix the tests")]
    for cid in ids:
        messages += [assistant(None, _call(cid)), result(cid, "ok")]
    return messages


def _call(cid: str) -> dict[str, Any]:
    fn = {"name": "Bash", "arguments": '{"command": "ls"}'}
    return {"id": cid, "type": "function", "function": fn}


def _ids(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    pairs = []
    for i, m in enumerate(messages):
        for call in m.get("tool_calls") or []:
            pairs.append((call["id"], messages[i + 1]["tool_call_id"]))
    return pairs


@pytest.mark.parametrize("rule", ["any", "openai", "openai_responses"])
def test_an_id_kimi_made_goes_back_as_it_made_it(rule: str) -> None:
    messages = _calls("functions.Bash:0", "functions.Read:1")
    out, repairs = repair_messages(messages, rule=RULES[rule])
    assert out is messages and repairs == []


def test_the_strictest_rule_renames_it_on_both_sides() -> None:
    out, repairs = repair_messages(_calls("functions.Bash:0"), rule=RULES["anthropic"])
    assert _ids(out) == [("functions_Bash_0", "functions_Bash_0")]
    assert repairs[0]["kind"] == "invalid_call_id"


def test_openai_refuses_ids_past_40_characters_and_they_are_cut_apart() -> None:
    other = VLLM[:-1] + "0"  # the same first 45 characters
    messages = _calls(VLLM, other, "call_short")
    out, _ = repair_messages(messages, rule=RULES["openai"])
    pairs = _ids(out)
    assert all(call == answer and 0 < len(call) <= 40 for call, answer in pairs)
    assert len({call for call, _ in pairs}) == 3
    assert pairs[2] == ("call_short", "call_short")
    assert pairs[0][0].startswith("chatcmpl-tool-")
    assert not find_violations(out, rule=RULES["openai"])
    again, _ = repair_messages(_calls(VLLM, other, "call_short"), rule=RULES["openai"])
    assert again == out  # the same ids on every request: the prefix stays cached


def test_responses_call_ids_may_run_to_64() -> None:
    messages = _calls(VLLM)
    assert repair_messages(messages, rule=RULES["openai_responses"])[0] is messages
    long = "fc_" + "a" * 70
    out, _ = repair_messages(_calls(long), rule=RULES["openai_responses"])
    assert len(_ids(out)[0][0]) == 64


def test_mistral_takes_nine_letters_and_digits_each_its_own() -> None:
    messages = _calls("call_abc123", "call_abc123", "Ab3dE6gH9")
    out, _ = repair_messages(messages, rule=RULES["mistral"])
    pairs = _ids(out)
    assert all(call == answer and len(call) == 9 and call.isalnum() for call, answer in pairs)
    assert len({call for call, _ in pairs}) == 3
    assert pairs[2] == ("Ab3dE6gH9", "Ab3dE6gH9")


def test_a_duplicate_at_the_length_limit_stays_within_it() -> None:
    forty = "c" * 40
    out, _ = repair_messages(_calls(forty, forty), rule=RULES["openai"])
    pairs = _ids(out)
    assert pairs[0][0] == forty and len(pairs[1][0]) == 40 and pairs[1][0] != forty


def test_a_control_character_is_refused_by_every_rule() -> None:
    for name in RULES:
        assert not RULES[name].accepts("call\n1"), name
        assert not RULES[name].accepts(""), name


def test_the_gemini_signature_id_passes_where_it_fits() -> None:
    assert RULES["anthropic"].accepts(SIGNED) and RULES["any"].accepts(SIGNED)
    assert not RULES["openai"].accepts(SIGNED)  # 71 characters: OpenAI would refuse it


def test_an_unknown_name_is_the_strictest_rule() -> None:
    assert rule_named("no such rule") is RULES["anthropic"]
