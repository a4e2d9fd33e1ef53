"""inject with a client's notices after the user's turn (Claude Code's deferred-tools list as a
``role: "system"`` message, a Responses ``developer`` message): the block goes on the turn
before them, the notices stay last and untouched; idempotent there too."""

from __future__ import annotations

from typing import Any

import pytest

from rules.context import inject
from rules.messages import INJECT_OPEN, text_of
from tests.rules.context.test_inject import FOLDER, MANY, REF, TOOLS, run
from tests.support.factories import TOKENS, assistant, result, shell, user


def notice(text: str, role: str = "system") -> dict[str, Any]:
    return {"role": role, "content": text}


@pytest.mark.parametrize("role", ["system", "developer"])
def test_the_block_goes_on_the_turn_before_trailing_notices(role: str) -> None:
    tail = [notice("Deferred tools: WebFetch", role), notice("Skills: none", role)]
    msgs = [user("make it"), assistant("done"), user("删除刚创建的文件夹"), *tail]
    out = run(msgs, [FOLDER], [REF])
    assert len(out.messages) == len(msgs) and out.messages[3:] == tail
    assert out.messages[3] is tail[0] and out.messages[4] is tail[1]
    assert text_of(out.messages[2]["content"]).startswith("删除刚创建的文件夹\n\n" + INJECT_OPEN)
    assert out.report["inject"]["position"] == "append" and out.report["inject"]["index"] == 2


def test_a_tool_result_before_a_notice_takes_it() -> None:
    msgs = [user("delete that"), assistant(None, shell("c9", "ls")), result("c9", "a.py")]
    out = run([*msgs, notice("A read was truncated.")], [FOLDER], [REF])
    assert text_of(out.messages[2]["content"]).startswith("a.py\n\n" + INJECT_OPEN)
    assert out.messages[3] == notice("A read was truncated.")


@pytest.mark.parametrize("position", ["append", "message"])
def test_idempotent_before_notices(position: str) -> None:
    cfg = inject.Config(position=position, sticky=False)  # type: ignore[arg-type]
    msgs = [user("删除刚创建的文件夹"), notice("Deferred tools: WebFetch")]
    once = run(msgs, [FOLDER], [REF], cfg)
    assert once.messages != msgs
    assert run(once.messages, [FOLDER], [REF], cfg).messages is once.messages


def test_shrunk_to_the_room_before_notices() -> None:
    cfg = inject.Config(max_entities=60)
    msgs = [user("删除刚创建的文件夹"), notice("Deferred tools: " + "WebFetch " * 40)]
    budget = TOKENS.count_messages(msgs) + TOKENS.count_tools(TOOLS) + 300
    out = run(msgs, MANY, [REF], cfg, budget=budget, tools=TOOLS)
    assert TOKENS.count_messages(out.messages) + TOKENS.count_tools(TOOLS) <= budget
    assert INJECT_OPEN in text_of(out.messages[0]["content"]) and out.messages[1] is msgs[1]


def test_never_after_a_prefill_a_notice_follows() -> None:
    msgs = [user("删除刚创建的文件夹"), assistant("Sure,"), notice("Deferred tools: WebFetch")]
    out = run(msgs, [FOLDER], [REF])
    assert out.messages[:3] == msgs and out.messages[-1]["content"].startswith(INJECT_OPEN)
