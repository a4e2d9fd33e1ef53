"""Cases the random-session memo tests can miss, each checked against the whole-list answer:
a duplicate result after a finished turn, a valid id reused after the resume point, the
observations when only the tool pairs ran on the last list, a kept list whose last message was
replaced, and a last message whose bytes change each request (a moving cache marker) that must
still let the check resume."""

from __future__ import annotations

from typing import Any

from rules.activity.observations import observations, of_context
from rules.base import Context, ListMemo, Message, release_lists
from rules.chain import validator
from rules.chain.call_ids import STRICTEST
from rules.chain.validator import find_violations, violations_of
from rules.tool_pairs import pairs_of


def _ctx(messages: list[Message], memo: ListMemo, tables: dict[str, Any] | None = None) -> Context:
    return Context(
        messages=messages, model="m", tokens=None, now=0.0, memo=memo, tables=tables or {}
    )  # type: ignore[arg-type]


def _call(cid: str, arguments: str = '{"path": "a.py"}') -> dict[str, Any]:
    return {
        "id": cid,
        "type": "function",
        "function": {"name": "read_file", "arguments": arguments},
    }


def _turn(cid: str, out: str = "x") -> list[Message]:
    return [
        {"role": "assistant", "content": "", "tool_calls": [_call(cid)]},
        {"role": "tool", "tool_call_id": cid, "content": out},
    ]


def _again(messages: list[Message], memo: ListMemo) -> list[Any]:
    release_lists()
    return violations_of(_ctx(messages, memo))


def test_a_duplicate_result_after_a_finished_turn() -> None:
    memo: ListMemo = {}
    first = [{"role": "user", "content": "go"}, *_turn("a")]
    violations_of(_ctx(first, memo))
    grown = [*first, {"role": "tool", "tool_call_id": "a", "content": "again"}]
    found = _again(grown, memo)
    assert found == find_violations(grown) and found  # a duplicate result, not an orphan


def test_a_valid_id_of_a_faulty_message_reused_after_the_resume_point() -> None:
    memo: ListMemo = {}
    bad = _call("b", arguments="[1]")  # invalid arguments: the message has faults
    first = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [bad]},
        {"role": "tool", "tool_call_id": "b", "content": "x"},
        {"role": "user", "content": "next"},
        *_turn("c"),
    ]
    violations_of(_ctx(first, memo))
    grown = [*first, *_turn("b", "z")]
    assert _again(grown, memo) == find_violations(grown)  # 'b' used twice


def test_observations_when_only_the_pairs_ran_on_the_last_list() -> None:
    memo: ListMemo = {}
    tables: dict[str, Any] = {}
    first = [{"role": "user", "content": "go"}, *_turn("a")]
    of_context(_ctx(first, memo, tables))
    release_lists()
    second = [*first, *_turn("b")]
    pairs_of(_ctx(second, memo, tables))  # one rule read the pairs, none the observations
    release_lists()
    third = [*second, *_turn("c")]
    assert of_context(_ctx(third, memo, tables)) == observations(third)


def test_a_kept_list_whose_last_message_was_replaced() -> None:
    memo: ListMemo = {}
    asked, answer, task = _turn("a")[0], _turn("a")[1], {"role": "user", "content": "go"}
    first = [task, asked, answer, _turn("b")[0]]
    violations_of(_ctx(first, memo))
    other = [task, asked, answer, {"role": "tool", "tool_call_id": "a", "content": "y"}]
    assert _again(other, memo) == find_violations(other)


def test_a_last_message_whose_bytes_change_still_resumes(monkeypatch: Any) -> None:
    # Claude Code moves its cache marker to the newest message: the last message of the
    # previous request comes back as a new object, and the check still resumes before it
    memo: ListMemo = {}
    messages: list[Message] = [{"role": "user", "content": "go"}]
    resumed: list[int] = []
    real = validator.check

    def spy(msgs: Any, table: Any = None, base: Any = None, rule: Any = STRICTEST) -> Any:
        resumed.append(base.resume if base is not None else -1)
        return real(msgs, table, base, rule)

    monkeypatch.setattr(validator, "check", spy)
    for k in range(8):
        kept = [*messages[:-1], dict(messages[-1])]  # the last message re-lowered
        messages = [*kept, *_turn(f"c{k}")]
        assert _again(messages, memo) == find_violations(messages)
    assert sum(r > 0 for r in resumed) >= 6, resumed
