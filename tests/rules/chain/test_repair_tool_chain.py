"""repair_tool_chain: one table row per kind of broken history, with the exact forwarded output
and the repairs reported; plus no-op, idempotence, purity and the validator's own table. (The
runner's final integrity check, the same repair: tests/proxy/rewrite/test_pipeline_runner.py.)"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from rules.chain import repair_tool_chain
from rules.chain.repairs import EMPTY_ASSISTANT, NULL_RESULT, SYNTHETIC_RESULT
from rules.chain.text import LATE_RESULT
from rules.chain.validator import find_violations
from rules.messages import HELD, PLACEHOLDER_PREFIX
from tests.support.factories import assistant, call, ctx, result, shell, system, user

SIGNED = "call_8f2c1d__thought__CiQB+fake/Sig9xYz0aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2yZ3A=="
BAD_SIGNED = "call.1__thought__Ci+/="  # the call's own part is no id

repair = repair_tool_chain.repair_messages

S, U = system(), user("fix the build")


def synth(cid: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": SYNTHETIC_RESULT}


def raw_call(cid: Any, args: Any, name: Any = "bash") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


CUSTOM = {
    "id": "c1",
    "type": "custom",
    "custom": {"name": "apply_patch", "input": "*** Begin Patch\n*** Add File: a.py\n+x\n"},
}

VALID = {
    "plain": [S, U, assistant("Hi")],
    "one_call": [S, U, assistant(None, shell("c1", "ls")), result("c1", "a.py")],
    "parallel_any_order": [
        S,
        U,
        assistant("", shell("c1", "ls"), shell("c2", "pwd")),
        result("c2", "/w"),
        result("c1", "a.py"),
        assistant("done"),
        user("thanks"),
    ],
    "null_tool_calls": [U, {"role": "assistant", "content": "x", "tool_calls": None}],
    "empty_string_result": [U, assistant(None, shell("c1", "true")), result("c1", "")],
    "list_content": [U, {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}],
    # a custom tool's call (free-form input, no JSON schema) and its result
    "custom_call": [
        U,
        {"role": "assistant", "content": None, "tool_calls": [CUSTOM]},
        result("c1", "Done!"),
    ],
    # an answer that is a refusal, audio, or a legacy function call is not an empty turn
    "refusal": [U, {"role": "assistant", "content": None, "refusal": "I can't help with that."}],
    "audio": [U, {"role": "assistant", "content": None, "audio": {"id": "audio_abc"}}],
    "legacy_function_call": [
        U,
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "bash", "arguments": "{}"},
        },
        {"role": "function", "name": "bash", "content": "ok"},
    ],
}


@pytest.mark.parametrize("name", list(VALID))
def test_valid_input_is_the_same_list_and_bytes(name: str) -> None:
    messages = VALID[name]
    before = orjson.dumps(messages)
    assert find_violations(messages) == []
    out, reps = repair(messages)
    assert out is messages and reps == []
    assert orjson.dumps(out) == before


# name -> (input, expected output, expected (kind, action) pairs in report order)
CASES: dict[str, tuple[list, list, list[tuple[str, str]]]] = {
    "orphan_result_kept_as_text": (
        [S, U, {"role": "tool", "tool_call_id": "gone", "name": "bash", "content": "total 0"}],
        [
            S,
            U,
            user(
                f"{PLACEHOLDER_PREFIX} tool result for call gone (bash) had no matching "
                "call]\ntotal 0"
            ),
        ],
        [("orphan_result", "kept_as_user_text")],
    ),
    "orphans_in_a_block_follow_it": (
        [
            U,
            assistant(None, shell("c1", "ls")),
            result("c1", "a"),
            result("x", "stray"),
            assistant("ok"),
        ],
        [
            U,
            assistant(None, shell("c1", "ls")),
            result("c1", "a"),
            user(f"{PLACEHOLDER_PREFIX} tool result for call x had no matching call]\nstray"),
            assistant("ok"),
        ],
        [("orphan_result", "kept_as_user_text")],
    ),
    "interrupted_final_call": (
        [U, assistant(None, shell("c1", "make"))],
        [U, assistant(None, shell("c1", "make")), synth("c1")],
        [("unanswered_call", "synthesized_result")],
    ),
    "user_typed_next": (
        [U, assistant(None, shell("c1", "make")), user("stop, do X instead")],
        [U, assistant(None, shell("c1", "make")), synth("c1"), user("stop, do X instead")],
        [("unanswered_call", "synthesized_result")],
    ),
    "partial_parallel_results": (
        [
            U,
            assistant(None, shell("c1", "a"), shell("c2", "b"), shell("c3", "c")),
            result("c2", "B"),
            assistant("next"),
        ],
        [
            U,
            assistant(None, shell("c1", "a"), shell("c2", "b"), shell("c3", "c")),
            result("c2", "B"),
            synth("c1"),
            synth("c3"),
            assistant("next"),
        ],
        [("unanswered_call", "synthesized_result")] * 2,
    ),
    "id_drift_case_space_fullwidth": (
        [
            U,
            assistant(None, shell("call_Ab1", "a"), shell("call_xy2", "b")),
            result(" CALL_ab1", "A"),
            result("ｃａｌｌ＿ｘｙ２", "B"),
        ],
        [
            U,
            assistant(None, shell("call_Ab1", "a"), shell("call_xy2", "b")),
            result("call_Ab1", "A"),
            result("call_xy2", "B"),
        ],
        [("id_drift", "id_unified"), ("id_drift", "id_unified")],
    ),
    "duplicate_results_identical": (
        [U, assistant(None, shell("c1", "ls")), result("c1", "a.py"), result("c1", "a.py")],
        [U, assistant(None, shell("c1", "ls")), result("c1", "a.py")],
        [("duplicate_result", "dropped_identical_copy")],
    ),
    "duplicate_results_different": (
        [U, assistant(None, shell("c1", "ls")), result("c1", "a.py"), result("c1", "b.py")],
        [
            U,
            assistant(None, shell("c1", "ls")),
            result(
                "c1", f"a.py\n\n{PLACEHOLDER_PREFIX} another result for this call follows]\nb.py"
            ),
        ],
        [("duplicate_result", "merged_into_first")],
    ),
    "result_after_user_message": (
        [U, assistant(None, shell("c1", "ls")), user("hurry"), result("c1", "a.py")],
        [U, assistant(None, shell("c1", "ls")), result("c1", "a.py"), user("hurry")],
        [("misplaced_result", "moved_next_to_call")],
    ),
    # moved back, the result would leave the model's own turn last (a prefill, which newer
    # models refuse): it stays last, as text, and its call gets a note saying so
    "result_after_assistant_message": (
        [U, assistant(None, shell("c1", "ls")), assistant("thinking"), result("c1", "a.py")],
        [
            U,
            assistant(None, shell("c1", "ls")),
            {"role": "tool", "tool_call_id": "c1", "content": LATE_RESULT},
            assistant("thinking"),
            user(f"{PLACEHOLDER_PREFIX} tool result for call c1 came after later turns]\na.py"),
        ],
        [("late_result", "kept_last_as_user_text")],
    ),
    "result_after_the_users_words_and_a_reply": (
        [U, assistant(None, shell("c1", "ls")), user("hurry"), assistant("ok"), result("c1", "a")],
        [
            U,
            assistant(None, shell("c1", "ls")),
            {"role": "tool", "tool_call_id": "c1", "content": LATE_RESULT},
            user("hurry"),
            assistant("ok"),
            user(f"{PLACEHOLDER_PREFIX} tool result for call c1 came after later turns]\na"),
        ],
        [("late_result", "kept_last_as_user_text")],
    ),
    "result_before_its_call": (
        [U, result("c1", "a.py"), assistant(None, shell("c1", "ls")), user("go on")],
        [U, assistant(None, shell("c1", "ls")), result("c1", "a.py"), user("go on")],
        [("misplaced_result", "moved_next_to_call")],
    ),
    "late_parallel_result_moves_back": (
        [
            U,
            assistant(None, shell("c1", "a"), shell("c2", "b")),
            result("c1", "A"),
            assistant(None, shell("c3", "c")),
            result("c3", "C"),
            result("c2", "B"),
        ],
        [
            U,
            assistant(None, shell("c1", "a"), shell("c2", "b")),
            result("c1", "A"),
            result("c2", "B"),
            assistant(None, shell("c3", "c")),
            result("c3", "C"),
        ],
        [("misplaced_result", "moved_next_to_call")],
    ),
    "id_reused_across_turns": (
        [
            U,
            assistant(None, shell("t1", "a")),
            result("t1", "A"),
            assistant(None, shell("t1", "b")),
            result("t1", "B"),
        ],
        [
            U,
            assistant(None, shell("t1", "a")),
            result("t1", "A"),
            assistant(None, shell("t1_2", "b")),
            result("t1_2", "B"),
        ],
        [("duplicate_call_id", "renamed")],
    ),
    "invalid_id_rewritten_both_sides": (
        [U, assistant(None, shell("call.1:x", "a")), result("call.1:x", "A")],
        [U, assistant(None, shell("call_1_x", "a")), result("call_1_x", "A")],
        [("invalid_call_id", "sanitised")],
    ),
    # some clients number their calls: both sides say the number, so the pair stays a pair
    "numbered_ids_said_as_their_digits": (
        [U, assistant(None, raw_call(7, "{}")), result(7, "A")],  # type: ignore[arg-type]
        [U, assistant(None, raw_call("7", "{}")), result("7", "A")],
        [("invalid_call_id", "number_to_string")],
    ),
    "numbered_call_answered_by_its_digits": (
        [U, assistant(None, raw_call(7, "{}")), result("7", "A")],
        [U, assistant(None, raw_call("7", "{}")), result("7", "A")],
        [("invalid_call_id", "number_to_string")],
    ),
    "a_number_beside_the_same_digits_as_text": (  # the text's id was there first
        [
            U,
            assistant(None, raw_call("7", "{}")),
            result("7", "A"),
            assistant(None, raw_call(7, "{}")),
            result(7, "B"),  # type: ignore[arg-type]
        ],
        [
            U,
            assistant(None, raw_call("7", "{}")),
            result("7", "A"),
            assistant(None, raw_call("7_2", "{}")),
            result("7_2", "B"),
        ],
        [("duplicate_call_id", "renamed")],
    ),
    "signed_id_with_a_bad_call_part_sanitised": (
        [U, assistant(None, shell(BAD_SIGNED, "a")), result(BAD_SIGNED, "A")],
        [U, assistant(None, shell("call_1__thought__Ci", "a")), result("call_1__thought__Ci", "A")],
        [("invalid_call_id", "sanitised")],
    ),
    "id_ending_in_a_newline_sanitised": (  # a "$" match let it through; providers refuse it
        [U, assistant(None, shell("toolu_1\n", "a")), result("toolu_1\n", "A")],
        [U, assistant(None, shell("toolu_1", "a")), result("toolu_1", "A")],
        [("invalid_call_id", "sanitised")],
    ),
    "truncated_arguments": (
        [U, assistant(None, raw_call("c1", '{"command": "ls -l')), result("c1", "x")],
        [
            U,
            assistant(None, raw_call("c1", '{"raw_arguments":"{\\"command\\": \\"ls -l"}')),
            result("c1", "x"),
        ],
        [("invalid_arguments", "wrapped_raw_arguments")],
    ),
    "arguments_as_object_and_empty": (
        [
            U,
            assistant(None, raw_call("c1", {"a": 1}), raw_call("c2", "")),
            result("c1", "x"),
            result("c2", "y"),
        ],
        [
            U,
            assistant(None, raw_call("c1", '{"a":1}'), raw_call("c2", "{}")),
            result("c1", "x"),
            result("c2", "y"),
        ],
        [
            ("invalid_arguments", "serialised_arguments_object"),
            ("invalid_arguments", "empty_arguments_to_empty_object"),
        ],
    ),
    "arguments_as_json_null": (  # Anthropic's "input": null lowers to this text
        [U, assistant(None, raw_call("c1", "null"), raw_call("c2", " null ")),
         result("c1", "x"), result("c2", "y")],
        [U, assistant(None, raw_call("c1", "{}"), raw_call("c2", "{}")),
         result("c1", "x"), result("c2", "y")],
        [
            ("invalid_arguments", "empty_arguments_to_empty_object"),
            ("invalid_arguments", "empty_arguments_to_empty_object"),
        ],
    ),
    "empty_tool_calls_array": (
        [U, {"role": "assistant", "content": "ok", "tool_calls": []}],
        [U, {"role": "assistant", "content": "ok"}],
        [("empty_tool_calls", "removed_empty_array")],
    ),
    "empty_assistant": (
        [U, {"role": "assistant", "content": None, "tool_calls": []}, user("?")],
        [U, {"role": "assistant", "content": EMPTY_ASSISTANT}, user("?")],
        [("empty_tool_calls", "removed_empty_array"), ("empty_assistant", "placeholder_content")],
    ),
    "null_tool_content": (
        [
            U,
            assistant(None, shell("c1", "true")),
            {"role": "tool", "tool_call_id": "c1", "content": None},
        ],
        [U, assistant(None, shell("c1", "true")), result("c1", NULL_RESULT)],
        [("null_tool_content", "placeholder_content")],
    ),
    "call_without_type": (
        [
            U,
            assistant(None, {"id": "c1", "function": {"name": "ls", "arguments": "{}"}}),
            result("c1", "x"),
        ],
        [
            U,
            assistant(
                None,
                {"id": "c1", "function": {"name": "ls", "arguments": "{}"}, "type": "function"},
            ),
            result("c1", "x"),
        ],
        [("invalid_call", "filled_type_and_name")],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_repair_table(name: str) -> None:
    messages, expected, kinds = CASES[name]
    snapshot = copy.deepcopy(messages)
    assert find_violations(messages), "the input of a repair case must be broken"
    out, reps = repair(messages)
    assert messages == snapshot, "the input must not be mutated"
    assert out == expected
    assert [(r["kind"], r["action"]) for r in reps] == kinds
    assert all({"kind", "index", "tool_call_id", "action"} <= set(r) for r in reps)
    assert find_violations(out) == []
    again, more = repair(out)
    assert again is out and more == []  # idempotent


def test_a_gemini_calls_signed_id_is_kept_byte_for_byte() -> None:
    """litellm's id of a Gemini call holds the model's thought signature (base64, ``+/=``) after
    ``__thought__``: sanitised, the signature reached Gemini 3 changed on the next turn."""
    messages = [U, assistant(None, shell(SIGNED, "a")), result(SIGNED, "A")]
    assert find_violations(messages) == []
    out, reps = repair(messages)
    assert out is messages and reps == []


def test_untouched_messages_keep_their_dicts() -> None:
    a1, r1 = assistant(None, shell("c1", "a")), result("c1", "A")
    messages = [U, a1, r1, assistant(None, shell("c2", "b")), user("next")]
    out, _ = repair(messages)
    assert out[1] is a1 and out[2] is r1 and out[0] is U


def test_runaway_turn_is_bounded() -> None:
    def size(n: int) -> tuple[int, list]:
        calls = [shell(f"c{k}", f"echo {k}") for k in range(n)]
        out, reps = repair([U, assistant(None, *calls), result("c0", "zero")])
        assert find_violations(out) == []
        added = len(orjson.dumps(out)) - sum(len(orjson.dumps(c)) for c in calls)
        return added, reps

    small, _ = size(30)
    big, reps = size(300)
    assert [r["kind"] for r in reps] == ["runaway_turn"]
    assert reps[0]["count"] == 299
    # What the repair adds does not grow with the number of calls (the dropped calls' own
    # bytes are gone; the note is bounded).
    assert big <= small + 20
    out, _ = repair([U, assistant(None, *[shell(f"c{k}", "x") for k in range(300)])])
    assert len(out) == 2 and "tool_calls" not in out[1]
    note = out[1]["content"]
    assert note.startswith(PLACEHOLDER_PREFIX) and "300 tool calls" in note


def test_a_runaway_turn_keeps_its_first_call_beside_an_answered_one() -> None:
    """The first call stays in its place with the interrupted note (Gemini's thought signature
    rides on the first of a turn's parallel calls, and must come back in that part); the calls
    between are left out in one note. The same request, the same forwarded messages."""
    calls = [shell(f"c{k}", f"echo {k}") for k in range(20)]
    messages = [U, assistant(None, *calls), result("c19", "nineteen")]
    out, reps = repair(messages)
    assert find_violations(out) == []
    assert [c["id"] for c in out[1]["tool_calls"]] == ["c0", "c19"]
    assert out[1]["tool_calls"][0] is calls[0]
    assert [(m["tool_call_id"], m["content"]) for m in out[2:]] == [
        ("c19", "nineteen"), ("c0", SYNTHETIC_RESULT)
    ]
    runaway = [r for r in reps if r["kind"] == "runaway_turn"]
    assert [r["count"] for r in runaway] == [18] and "18 tool calls" in out[1]["content"]
    assert orjson.dumps(repair(messages)[0]) == orjson.dumps(out)


def test_a_runaway_turn_of_custom_calls_names_their_input() -> None:
    calls = [{**CUSTOM, "id": f"c{k}"} for k in range(300)]
    out, reps = repair([U, assistant(None, *calls)])
    assert [r["kind"] for r in reps] == ["runaway_turn"] and find_violations(out) == []
    assert 'apply_patch({"input":"*** Begin Patch' in out[1]["content"]


def test_few_unanswered_calls_are_not_a_runaway() -> None:
    calls = [shell(f"c{k}", "x") for k in range(16)]
    out, reps = repair([U, assistant(None, *calls)])
    assert len(out) == 2 + 16
    assert {r["kind"] for r in reps} == {"unanswered_call"}


def test_ambiguous_drift_is_not_guessed() -> None:
    messages = [
        U,
        assistant(None, shell("call_a", "x"), shell("CALL_A", "y")),
        result("Call_A ", "?"),
        result("call_a", "1"),
        result("CALL_A", "2"),
    ]
    out, reps = repair(messages)
    assert find_violations(out) == []
    assert ("orphan_result", 2) in [(r["kind"], r["index"]) for r in reps]
    assert "?" in out[-1]["content"]


def test_ambiguous_drift_takes_the_one_call_still_open() -> None:
    """``call_a`` answered by its own id, ``CALL_A`` is near both ``call_a`` and ``call_A``: only
    one of them can still take a result. It was kept as an orphan's text and ``call_A`` told it
    was interrupted."""
    messages = [
        U,
        assistant(None, shell("call_a", "x"), shell("call_A", "y")),
        result("call_a", "1"),
        result("CALL_A", "2"),
    ]
    out, reps = repair(messages)
    assert find_violations(out) == []
    assert [r["kind"] for r in reps] == ["id_drift"]
    answers = [(m["tool_call_id"], m["content"]) for m in out[2:]]
    assert answers == [("call_a", "1"), ("call_A", "2")]


def test_drift_can_be_turned_off() -> None:
    messages = [U, assistant(None, shell("call_1", "x")), result("CALL_1", "out")]
    out, reps = repair(messages, match_drifted_ids=False)
    assert sorted(r["kind"] for r in reps) == ["orphan_result", "unanswered_call"]
    assert find_violations(out) == []


# The validator's own table: (messages, expected violation kinds)
VIOLATIONS = [
    ([U, result("x", "y")], ["orphan_result"]),
    ([U, assistant(None, shell("c1", "a"))], ["unanswered_call"]),
    (
        [U, assistant(None, shell("c1", "a")), result("c1", "1"), result("c1", "1")],
        ["duplicate_result"],
    ),
    ([U, assistant(None, shell("a b", "a")), result("a b", "1")], ["invalid_call_id"]),
    (
        [
            U,
            assistant(None, shell("c", "a")),
            result("c", "1"),
            assistant(None, shell("c", "b")),
            result("c", "2"),
        ],
        ["duplicate_call_id"],
    ),
    ([U, assistant(None, raw_call("c", "[1]")), result("c", "1")], ["invalid_arguments"]),
    ([U, {"role": "assistant", "content": "x", "tool_calls": []}], ["empty_tool_calls"]),
    ([U, {"role": "assistant", "content": "  "}], ["empty_assistant"]),
    (
        [U, assistant(None, shell("c", "a")), {"role": "tool", "tool_call_id": "c"}],
        ["null_tool_content"],
    ),
    ([U, assistant(None, call("c", "")), result("c", "1")], ["invalid_call"]),
    (
        [U, assistant(None, shell("c", "a")), user("u"), result("c", "1")],
        ["unanswered_call", "orphan_result"],
    ),
]


@pytest.mark.parametrize(("messages", "kinds"), VIOLATIONS)
def test_validator_table(messages: list, kinds: list[str]) -> None:
    found = find_violations(messages)
    assert sorted(v["kind"] for v in found) == sorted(kinds)
    assert all(set(v) == {"kind", "index", "tool_call_id", "message"} for v in found)


def test_rule_apply_reports_and_keeps_state() -> None:
    broken = [U, assistant(None, shell("c1", "ls"))]
    context = ctx(broken)
    cfg = repair_tool_chain.Config()
    res = repair_tool_chain.apply(context, cfg)
    assert res.report["repairs"][0]["kind"] == "unanswered_call"
    assert res.state is context.state and res.messages is not broken
    fine = context.evolve(messages=res.messages)
    again = repair_tool_chain.apply(fine, cfg)
    assert again.messages is res.messages and again.report == {"repairs": []}


def test_config_rejects_bad_options() -> None:
    with pytest.raises(ValueError):
        repair_tool_chain.Config(max_synthetic_results=0)
    with pytest.raises(ValueError):
        repair_tool_chain.Config(unknown=True)  # type: ignore[call-arg]


def test_one_id_reused_for_every_call_of_a_long_history() -> None:
    messages = [U]
    for k in range(500):
        messages += [assistant(None, shell("call_0", f"echo {k}")), result("call_0", f"out {k}")]
    out, reps = repair(messages)
    assert find_violations(out) == []
    assert len(out) == len(messages)
    for k in range(500):
        a, r = out[1 + 2 * k], out[2 + 2 * k]
        assert r["tool_call_id"] == a["tool_calls"][0]["id"] and r["content"] == f"out {k}"
    assert sum(r["kind"] == "duplicate_call_id" for r in reps) == 499


def held(cid: str, text: str) -> dict[str, Any]:
    """A result of a call the provider holds (a Responses adapter's lowering marks it)."""
    return {**result(cid, text), HELD: True}


def test_results_of_calls_the_provider_holds_stand_as_they_are() -> None:
    """A stored response's call answered in the next request: valid alone, the same list."""
    for messages in (
        [S, held("call_A", "exit 0"), U],
        [S, held("call_A", "a"), held("call_B", "b")],
        [S, U, assistant(None, shell("c1", "ls")), result("c1", "a.py"), held("call_A", "b")],
    ):
        assert find_violations(messages) == []
        out, reps = repair(messages)
        assert out is messages and reps == []


def test_a_repair_around_them_keeps_them_in_place() -> None:
    """Another break is repaired; the held result keeps its dict and its place, and an orphan
    next to it is still kept as user text, after it."""
    h = held("call_A", "exit 0")
    messages = [S, h, result("call_gone", "lost"), U, assistant(None, shell("c1", "ls"))]
    out, reps = repair(copy.deepcopy(messages))
    assert out[1] == h and out[1][HELD] is True
    assert out[2]["role"] == "user" and "call_gone" in out[2]["content"]
    assert out[3:5] == [U, messages[4]] and out[5] == synth("c1")
    assert sorted(r["kind"] for r in reps) == ["orphan_result", "unanswered_call"]
    assert find_violations(out) == []


def test_a_held_result_whose_call_is_in_the_messages_answers_that_call() -> None:
    """The marker says only where the call may be: a call in the messages is its call."""
    messages = [S, U, assistant(None, shell("c1", "ls")), user("wait"), held("c1", "a.py")]
    out, reps = repair(messages)
    assert [r["kind"] for r in reps] == ["misplaced_result"]
    assert out[3]["tool_call_id"] == "c1" and out[4] == user("wait")


def test_a_held_result_is_not_matched_to_a_drifted_id() -> None:
    """Drift matching is for results of the messages' calls; a held one is left to the provider."""
    messages = [S, U, assistant(None, shell("call_a", "ls")), held("CALL_A ", "x")]
    out, reps = repair(messages)
    assert out[3] == synth("call_a") and out[4] == messages[3]
    assert [r["kind"] for r in reps] == ["unanswered_call"]


def test_a_second_result_for_a_held_call_is_kept_as_text_and_nothing_is_flattened() -> None:
    """Only the first result of a held call stands; a second is an orphan, as for any call."""
    messages = [S, U, assistant(None, shell("c1", "ls")), result("c1", "ok")]
    messages += [held("h1", "a"), held("h1", "b"), user("y")]
    out, reps = repair(copy.deepcopy(messages))
    assert [r["kind"] for r in reps] == ["orphan_result"]
    assert out[:5] == messages[:5] and out[5]["role"] == "user" and "b" in out[5]["content"]
    assert find_violations(out) == []


def test_a_held_mark_without_a_string_id_is_an_orphan_as_before() -> None:
    bad = {"role": "tool", "tool_call_id": None, "content": "x", HELD: True}
    messages = [S, U, assistant(None, shell("c1", "ls")), bad]
    out, reps = repair(messages)
    assert sorted(r["kind"] for r in reps) == ["orphan_result", "unanswered_call"]
    assert find_violations(out) == []


def test_a_held_result_before_a_later_call_of_its_id_stays_and_the_call_keeps_its_own() -> None:
    """The validator takes the held result where no call before it has its id; so does the
    repair when another break makes it rebuild (not the later call's result merged into it)."""
    h = held("c1", "held")
    messages = [U, h, user("y"), assistant(None, shell("c1", "ls")), result("c1", "b")]
    messages.append(result("ghost", "g"))
    out, reps = repair(copy.deepcopy(messages))
    assert [r["kind"] for r in reps] == ["orphan_result"]
    assert out[:5] == messages[:5] and out[5]["role"] == "user"
    assert find_violations(out) == []
