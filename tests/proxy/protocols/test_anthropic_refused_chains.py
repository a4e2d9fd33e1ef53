"""Chains Anthropic would refuse. A result the client sends last whose call lies before the
model's last turn (a client that split one streamed turn in two; a user who typed while the tool
ran) is not moved back beside its call: the request would end on the model's own turn, a
prefill, which Claude 4.6 and later refuse with a 400 on every retry. It stays last, as the
user's text; its call gets a note. A ``tool_use`` without its ``input`` gets an empty one."""

from __future__ import annotations

import pytest

from proxy.rewrite.engine import Engine
from rules.messages import text_of
from tests.proxy.protocols.test_anthropic_adapter import (
    body,
    result,
    rewrite,
    text,
    thinking,
    tool_use,
)

TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
THINKING = {"type": "thinking", "thinking": "list the files", "signature": "sig"}


@pytest.mark.parametrize(
    "middle",
    [
        [{"role": "assistant", "content": [THINKING, TOOL_USE]},
         {"role": "assistant", "content": [text("Let me look.")]}],
        [{"role": "assistant", "content": [TOOL_USE]}, {"role": "user", "content": "hurry"},
         {"role": "assistant", "content": [text("ok")]}],
    ],
)  # fmt: skip
async def test_a_late_result_keeps_the_request_ending_on_a_user_turn(
    engine: Engine, middle: list[dict[str, object]]
) -> None:
    b = body(
        {"role": "user", "content": "fix the bug"},
        *middle,
        {"role": "user", "content": [result("toolu_1", "a.py")]},
    )
    out = await rewrite(engine, b)
    messages = out.body["messages"]
    assert messages[-1]["role"] == "user"
    assert "a.py" in text_of(messages[-1]["content"])
    blocks = [(i, b) for i, m in enumerate(messages) if isinstance(m["content"], list)
              for b in m["content"]]  # fmt: skip
    uses = [i for i, blk in blocks if blk["type"] == "tool_use"]
    answer = messages[uses[0] + 1]["content"][0]  # the call is answered right after it
    assert answer["type"] == "tool_result" and answer["tool_use_id"] == "toolu_1"


async def test_a_tool_use_without_its_input_is_given_an_empty_one(engine: Engine) -> None:
    """Anthropic requires a ``tool_use``'s ``input``: one sent without it is given ``{}``."""
    call = {"type": "tool_use", "id": "toolu_2", "name": "Bash"}
    b = body(
        {"role": "user", "content": "fix the bug"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result("toolu_2", "done")]},
    )
    out = await rewrite(engine, b)
    forwarded = out.body["messages"][1]["content"][0]
    assert forwarded["type"] == "tool_use" and forwarded["input"] == {}
    assert "input" not in call  # the client's block is left as it came


MARK = {"type": "ephemeral"}


@pytest.mark.parametrize(
    "last",
    [
        [result("toolu_gone", "file_a", cache_control=MARK)],  # the mark on the result
        [text("go on"), result("toolu_gone", [text("file_a", cache_control=MARK)])],  # inside it
    ],
)
async def test_an_orphan_result_made_text_keeps_the_clients_breakpoint(
    engine: Engine, last: list[dict[str, object]]
) -> None:
    # Claude Code marks its last block for the cache; a result whose call is gone becomes the
    # user's text, and the mark goes with it (before, the request went with no breakpoint on its
    # turn: nothing written to the cache, the next request billed it all again)
    b = body({"role": "user", "content": "list the files"},
             {"role": "assistant", "content": [text("ok")]},
             {"role": "user", "content": last})  # fmt: skip
    out = await rewrite(engine, b)
    final = out.body["messages"][-1]["content"]
    assert "file_a" in text_of(final) and final[-1]["cache_control"] == MARK
    marks = [blk for m in out.body["messages"] if isinstance(m["content"], list)
             for blk in m["content"] if "cache_control" in blk]  # fmt: skip
    assert len(marks) == 1


USE_2 = {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "pwd"}}


@pytest.mark.parametrize(
    ("run", "words"),
    [
        ([[result("toolu_1", "a.py")], [result("toolu_2", "/tmp")]], []),
        ([[result("toolu_1", "a.py")], "and then", [result("toolu_2", "/tmp")]], ["and then"]),
        ([[result("toolu_1", "a.py"), text("see")], [result("toolu_2", "/tmp"), text("go on")]],
         ["see", "go on"]),
    ],
)  # fmt: skip
async def test_results_split_over_user_messages_are_merged_into_the_first(
    engine: Engine, run: list[object], words: list[str]
) -> None:
    """Anthropic reads each ``tool_result`` against the message just before it ("each
    tool_result block must have a corresponding tool_use block in the previous message"): a
    client that sends each of a turn's results as its own user message gets a 400 on every
    retry. The run of user messages is merged into one, its results first."""
    b = body(
        {"role": "user", "content": "fix the bug"},
        {"role": "assistant", "content": [TOOL_USE, USE_2]},
        *({"role": "user", "content": c} for c in run),
    )
    out = await rewrite(engine, b)  # checks the forwarded chain
    messages = out.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    blocks = messages[2]["content"]
    assert [blk.get("tool_use_id") for blk in blocks[:2]] == ["toolu_1", "toolu_2"]
    assert all(w in text_of(blocks) for w in words)  # nothing the user said is lost
    assert messages[0] is b["messages"][0] and messages[1] is b["messages"][1]


async def test_a_user_message_after_the_task_is_not_merged_into_it(engine: Engine) -> None:
    # a result after the task answers nothing: it becomes text, and the task's message (Claude
    # Code derives a check from it) stays as sent
    b = body({"role": "user", "content": "fix the bug"},
             {"role": "user", "content": [result("toolu_9", "a.py")]})  # fmt: skip
    out = await rewrite(engine, b)
    assert out.body["messages"][0] is b["messages"][0]
    assert "a.py" in text_of(out.body["messages"][-1]["content"])


@pytest.mark.parametrize(
    "turns",
    [
        # the result sent in a turn of its own after the call's
        [{"role": "assistant", "content": [TOOL_USE]},
         {"role": "assistant", "content": [result("toolu_1", "REAL-OUT"), text("x")]}],
        # the result in the very turn that made the call
        [{"role": "assistant", "content": [TOOL_USE, result("toolu_1", "REAL-OUT"), text("x")]}],
    ],
    ids=["own-turn", "same-turn"],
)  # fmt: skip
async def test_a_result_in_the_models_turn_is_moved_to_a_users_message_and_answers_its_call(
    engine: Engine, turns: list[dict[str, object]]
) -> None:
    """Anthropic takes a ``tool_result`` in a user's message only. One in an assistant's turn
    was forwarded there, and the call got a note that it was interrupted instead of its
    output."""
    b = body({"role": "user", "content": "go"}, *turns, {"role": "user", "content": "next"})
    out = await rewrite(engine, b)  # asserts the forwarded body passes the protocol's check
    messages = out.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"] == [TOOL_USE]
    assert messages[2]["content"] == [result("toolu_1", "REAL-OUT")]
    assert messages[3]["content"] == [text("x")]
    assert "misplaced_block" in {r["kind"] for r in out.report["repairs"]}


async def test_a_turn_split_around_its_result_keeps_its_thinking_at_the_final_call(
    engine: Engine,
) -> None:
    """With thinking on, Anthropic refuses a final assistant message (whose calls the last
    results answer) that does not start with thinking. A turn split around a result it held
    left its thinking on the first piece and the final call without: its thinking now leads
    the piece with the turn's last call, the earlier piece going without (as Anthropic lets an
    earlier turn's thinking go)."""
    b = body(
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [thinking(), tool_use("toolu_1", "ls"),
                                          result("toolu_1", "a.py"), text("now pwd"),
                                          tool_use("toolu_2", "pwd")]},
        {"role": "user", "content": [result("toolu_2", "/r")]},
        thinking={"type": "enabled", "budget_tokens": 1024},
    )  # fmt: skip
    out = await rewrite(engine, b)
    messages = out.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"] == [tool_use("toolu_1", "ls")]
    assert messages[2]["content"] == [result("toolu_1", "a.py")]
    assert messages[3]["content"] == [thinking(), text("now pwd"), tool_use("toolu_2", "pwd")]
    assert messages[4] == b["messages"][2]


@pytest.mark.parametrize(
    "answers",
    [[result("toolu_1", "a.py"), result("toolu_2", "/r")],  # both answered: a valid history
     [result("toolu_2", "/r")]],  # the first call's result missing
    ids=["answered", "one-missing"],
)  # fmt: skip
async def test_consecutive_assistant_messages_are_one_turn(
    engine: Engine, answers: list[dict[str, object]]
) -> None:
    """Anthropic reads consecutive assistant messages as one turn, answered by the next user
    message. Lowered as they came, the first call's result (or the note for a missing one) went
    between them, and the final piece, whose call the last results answer, started without the
    turn's thinking: a 400 with thinking on, even for a history Anthropic takes as sent."""
    b = body(
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [thinking(), tool_use("toolu_1", "ls")]},
        {"role": "assistant", "content": [text("and"), tool_use("toolu_2", "pwd")]},
        {"role": "user", "content": answers},
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    out = await rewrite(engine, b)
    messages = out.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [thinking(), tool_use("toolu_1", "ls"), text("and"),
                                      tool_use("toolu_2", "pwd")]  # fmt: skip
    ids = [blk["tool_use_id"] for blk in messages[2]["content"]]
    assert sorted(ids) == ["toolu_1", "toolu_2"]
    assert "a.py" in text_of(messages[2]["content"]) or len(answers) == 1


async def test_consecutive_assistant_messages_without_calls_stay_as_sent(engine: Engine) -> None:
    b = body(
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [text("one")]},
        {"role": "assistant", "content": [text("two")]},
        {"role": "user", "content": "next"},
    )
    out = await rewrite(engine, b)
    assert out.body["messages"] == b["messages"]
