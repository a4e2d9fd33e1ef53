"""inject: one block at the tail, fixed section order, empty sections left out, capped,
positions, idempotent, nothing when there is nothing to say."""

from __future__ import annotations

from typing import Any

import pytest

from rules.base import CacheFacts, SessionState
from rules.context import inject
from rules.messages import INJECT_CLOSE, INJECT_OPEN, text_of
from tests.support.factories import TOKENS, assistant, ctx, result, shell, user

CFG = inject.Config()
# the previous request long ago: the working set is worth saying (see test_task_aware)
COLD = CacheFacts(last_at=0.0)


def ev(path: str, typ: str, action: str, seq: int, **extra: Any) -> dict[str, Any]:
    return {
        "type": typ,
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "action": action,
        "first_seen": 1000.0,
        "call_id": f"c{seq}",
        "seq": seq,
        "tool": "bash",
        **extra,
    }


FOLDER = ev("~/Desktop/123", "folder", "create", 1)
FILE = ev("/w/a.py", "file", "modify", 2)
REF = {
    "mention": "刚创建的文件夹",
    "entity": {"type": "folder", "name": "123", "path": "~/Desktop/123", "action": "create"},
    "confidence": 0.95,
    "chain": [{"session": "me", "depth": 0, "candidates": 1}],
}
ABSTAINED = {
    "mention": "it",
    "entity": None,
    "confidence": 0.45,
    "chain": [],
    "abstained": "low_confidence",
}


def run(
    messages: list[dict[str, Any]],
    events: list[dict[str, Any]] | None = None,
    refs: list[dict[str, Any]] | None = None,
    cfg: inject.Config = CFG,
    state: dict[str, Any] | None = None,
    budget: int | None = None,
    tools: list[Any] | None = None,
):  # type: ignore[no-untyped-def]
    data = {"entities": events or [], **(state or {})}
    context = ctx(
        messages,
        now=1010.0,
        session_id="me",
        state=SessionState(data),
        report={"references": refs or [], "warnings": []},
        budget=budget,
        tools=tools,
        cache=COLD,
    )
    return inject.apply(context, cfg)


def block_of(messages: list[dict[str, Any]]) -> str:
    text = text_of(messages[-1]["content"])
    return text[text.index(INJECT_OPEN) :]


def test_reference_gives_block_appended_to_last_user_message() -> None:
    msgs = [user("make it"), assistant("done"), user("删除刚创建的文件夹")]
    out = run(msgs, [FOLDER, FILE], [REF])
    assert out.messages[:-1] == msgs[:-1] and len(out.messages) == len(msgs)
    assert msgs[-1] == user("删除刚创建的文件夹")  # the input is not mutated
    text = text_of(out.messages[-1]["content"])
    assert text.startswith("删除刚创建的文件夹\n\n" + INJECT_OPEN) and text.endswith(INJECT_CLOSE)
    block = block_of(out.messages)
    assert block.index("Recent context") < block.index("Resolved references")
    assert "- modified file /w/a.py\n- created folder ~/Desktop/123" in block  # newest first
    assert '"刚创建的文件夹" means the folder ~/Desktop/123 (created)' in block
    assert out.report["inject"]["position"] == "append"


@pytest.mark.parametrize(
    ("events", "refs", "cfg"),
    [
        ([FOLDER], [], CFG),  # no reference, recent context only on reference
        ([FOLDER], [ABSTAINED], CFG),  # a low-confidence mention does not count
        ([], [], inject.Config(recent_context="always")),  # nothing known
        ([FOLDER], [], inject.Config(recent_context="never")),
    ],
)
def test_nothing_to_say_leaves_the_list_alone(
    events: list[dict[str, Any]], refs: list[dict[str, Any]], cfg: inject.Config
) -> None:
    msgs = [user("hello")]
    out = run(msgs, events, refs, cfg)
    assert out.messages is msgs and out.report == {}


def test_always_shows_recent_context_without_reference() -> None:
    out = run([user("go on")], [FOLDER], [], inject.Config(recent_context="always"))
    block = block_of(out.messages)
    assert "created folder ~/Desktop/123" in block and "Resolved references" not in block


def test_ambiguous_reference_shows_the_candidates_context() -> None:
    amb = {**ABSTAINED, "abstained": "ambiguous"}
    block = block_of(run([user("x")], [FOLDER], [amb]).messages)
    assert "Recent context" in block and "Resolved references" not in block


def test_appends_to_a_tool_message_at_the_tail() -> None:
    msgs = [user("delete that file"), assistant(None, shell("c9", "ls")), result("c9", "a.py")]
    out = run(msgs, [FILE], [REF])
    assert out.messages[-1]["role"] == "tool" and out.messages[-1]["tool_call_id"] == "c9"
    assert text_of(out.messages[-1]["content"]).startswith("a.py\n\n" + INJECT_OPEN)


def test_trailing_message_position() -> None:
    msgs = [user("删除刚创建的文件夹")]
    out = run(msgs, [FOLDER], [REF], inject.Config(position="message"))
    assert out.messages[0] is msgs[0]
    assert out.messages[-1]["role"] == "user"
    assert out.messages[-1]["content"].startswith(INJECT_OPEN)


def test_list_content_gets_a_text_part() -> None:
    msgs = [{"role": "user", "content": [{"type": "text", "text": "删除刚创建的文件夹"}]}]
    out = run(msgs, [FOLDER], [REF])
    parts = out.messages[-1]["content"]
    assert parts[0] == msgs[0]["content"][0] and parts[-1]["text"].startswith(INJECT_OPEN)


def test_never_after_an_assistant_prefill() -> None:
    msgs = [user("删除刚创建的文件夹"), assistant("Sure,")]
    assert run(msgs, [FOLDER], [REF]).messages is msgs


@pytest.mark.parametrize("position", ["append", "message"])
def test_idempotent_and_deterministic(position: str) -> None:
    cfg = inject.Config(position=position)  # type: ignore[arg-type]
    msgs = [user("删除刚创建的文件夹")]
    once = run(msgs, [FOLDER, FILE], [REF], cfg)
    twice = run(once.messages, [FOLDER, FILE], [REF], cfg)
    assert twice.messages is once.messages
    assert run(msgs, [FOLDER, FILE], [REF], cfg).messages == once.messages


def test_capped_dropping_oldest_entities_first() -> None:
    many = [ev(f"/w/deep/{'x' * 60}/file_{i}.py", "file", "create", i) for i in range(100)]
    cfg = inject.Config(max_entities=100, max_tokens=200)
    out = run([user("x")], many, [REF], cfg)
    block = block_of(out.messages)
    assert TOKENS.count_text(block) <= 200
    assert "file_99.py" in block and "file_0.py" not in block  # newest kept
    assert "Resolved references" in block


def test_working_set_section_comes_last() -> None:
    state = {"working_set": {"goal": "ship the release"}}
    cfg = inject.Config(working_set_min_messages=0)
    out = run([user("删除刚创建的文件夹")], [FOLDER], [REF], cfg=cfg, state=state)
    block = block_of(out.messages)
    assert block.index("Resolved references") < block.index("ship the release")


def test_working_set_only_in_requests_long_enough_to_lose_it() -> None:
    state = {"working_set": {"goal": "ship the release"}}
    short = [user("ship the release")]
    assert run(short, state=state).messages is short  # all of it is in view already
    long = [
        user("ship the release"),
        assistant("a"),
        user("b"),
        assistant("c"),
        user("d"),
        assistant("e"),
        user("go on"),
    ]
    said = inject.Config(say_visible=True)  # the goal is in view: said only when asked to
    assert "ship the release" in block_of(run(long, cfg=said, state=state).messages)


def test_moves_show_where_from() -> None:
    moved = ev("/w/b.txt", "file", "move", 3, **{"from": "/w/a.txt"})
    block = block_of(run([user("x")], [moved], [], inject.Config(recent_context="always")).messages)
    assert "- moved file /w/b.txt (from /w/a.txt)" in block


def with_chain(*chain: dict[str, Any]) -> dict[str, Any]:
    return {**REF, "chain": list(chain)}


# (the reference's chain, the label expected or None): the label names the session of the chain
# entry that yielded the entity, and only when that entry is an ancestor (depth > 0).
CHAIN_CASES = [
    pytest.param([{"session": "me", "depth": 0, "candidates": 1}], None, id="own"),
    pytest.param(
        [
            {"session": "me", "depth": 0, "candidates": 2},
            {"resolver": "cheap", "session": "me", "depth": 0},
        ],
        None,
        id="resolver-pick-own-session",
    ),
    pytest.param(
        [
            {"session": "me", "depth": 0, "candidates": 0},
            {"session": "dad", "depth": 1, "candidates": 1},
        ],
        "dad",
        id="parent",
    ),
    pytest.param(
        [
            {"session": "me", "depth": 0, "candidates": 0},
            {"session": "dad", "depth": 1, "candidates": 2},
            {"resolver": "cheap", "session": "dad", "depth": 1},
        ],
        "dad",
        id="resolver-pick-parent-session",
    ),
]


@pytest.mark.parametrize(("chain", "parent"), CHAIN_CASES)
def test_parent_label_follows_the_yielding_chain_entry(
    chain: list[Any], parent: str | None
) -> None:
    (line,) = inject.reference_lines([with_chain(*chain)])
    if parent is None:
        assert "parent session" not in line
    else:
        assert line.endswith(f", from parent session {parent}")


def test_a_tool_output_ending_with_the_closing_tag_still_gets_the_block() -> None:
    msgs = [
        user("delete that folder"),
        assistant(None, shell("c1", "cat notes.md")),
        result("c1", "notes\n" + INJECT_CLOSE),
    ]
    out = run(msgs, [FOLDER], [REF])
    assert out.messages is not msgs and block_of(out.messages).startswith(INJECT_OPEN)
    assert run(out.messages, [FOLDER], [REF]).messages is out.messages  # and only once


MANY = [ev(f"/w/deep/{'x' * 60}/file_{i}.py", "file", "create", i) for i in range(60)]
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run " * 50}}]


@pytest.mark.parametrize("position", ["append", "message"])
def test_block_shrinks_to_the_room_left_under_the_budget(position: str) -> None:
    cfg = inject.Config(max_entities=60, position=position)  # type: ignore[arg-type]
    msgs = [user("删除刚创建的文件夹")]
    full = run(msgs, MANY, [REF], cfg)
    assert full.report["inject"]["tokens"] > 300
    budget = TOKENS.count_messages(msgs) + TOKENS.count_tools(TOOLS) + 300
    out = run(msgs, MANY, [REF], cfg, budget=budget, tools=TOOLS)
    assert TOKENS.count_messages(out.messages) + TOKENS.count_tools(TOOLS) <= budget
    assert "Resolved references" in block_of(out.messages)
    assert out.report["inject"]["room"] < cfg.max_tokens
    assert "warnings" not in out.report
    assert run(out.messages, MANY, [REF], cfg, budget=budget, tools=TOOLS).messages is out.messages


def test_no_room_keeps_the_references_and_warns_over_budget() -> None:
    msgs = [user("删除刚创建的文件夹")]
    budget = TOKENS.count_messages(msgs) + 5
    out = run(msgs, MANY, [REF], inject.Config(max_entities=60), budget=budget)
    block = block_of(out.messages)
    assert "Resolved references" in block and "Recent context" not in block
    (warning,) = out.report["warnings"]
    assert warning["kind"] == "over_budget" and warning["budget"] == budget
    assert warning["tokens"] == TOKENS.count_messages(out.messages) > budget


def test_no_room_and_nothing_essential_leaves_the_list_alone() -> None:
    msgs = [user("go on")]
    cfg = inject.Config(recent_context="always")
    out = run(msgs, [FOLDER], [], cfg, budget=TOKENS.count_messages(msgs) + 5)
    assert out.messages is msgs and out.report["inject"]["skipped"] == "no room under the budget"


def test_idempotent_on_an_empty_last_message() -> None:
    msgs = [user("删除刚创建的文件夹"), assistant(None, shell("c1", "true")), result("c1", "")]
    once = run(msgs, [FOLDER], [REF])
    assert text_of(once.messages[-1]["content"]).startswith(INJECT_OPEN)
    assert run(once.messages, [FOLDER], [REF]).messages is once.messages


def test_a_mention_repeated_in_the_turn_is_said_once() -> None:
    text = "zip the folder I just created, then delete the folder I just created"
    twice = [{**REF, "mention": "the folder I just created"}] * 2
    out = run([user("make it"), assistant("done"), user(text)], [FOLDER], twice)
    block = block_of(out.messages)
    assert block.count('"the folder I just created" means the folder ~/Desktop/123') == 1


@pytest.mark.parametrize(
    "request_fields",
    [
        {"response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": {}}}},
        {"text": {"format": {"type": "json_schema", "name": "r", "schema": {}}}},
        {"output_config": {"format": {"type": "json_schema", "schema": {}}}},
        {"generationConfig": {"responseJsonSchema": {"type": "OBJECT"}}},
    ],
)
def test_a_side_call_with_a_schema_and_no_tools_gets_no_new_block(
    request_fields: dict[str, Any],
) -> None:
    """Gemini CLI's routing classifier (no tools, a JSON schema for its score) got the working
    set and the reference's pointer: tokens on a call the agent does not act on."""
    msgs = [user("make it"), assistant("done"), user("删除刚创建的文件夹")]
    data = {"entities": [FOLDER, FILE]}

    def placed(fields: dict[str, Any], tools: list[Any] | None) -> Any:
        context = ctx(msgs, now=1010.0, session_id="me", state=SessionState(data),
                      report={"references": [REF], "warnings": []}, cache=COLD,
                      request=fields, tools=tools)  # fmt: skip
        return inject.apply(context, CFG)

    assert placed(request_fields, None).messages is msgs
    # with tools it is the agent's own loop; without a schema a JSON-mode loop may act on it
    tool = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    assert placed(request_fields, tool).messages is not msgs
    assert placed({"response_format": {"type": "json_object"}}, None).messages is not msgs
    # an agent whose only tools are hosted ones (web search) is still an agent
    hosted = {**request_fields, "tools": [{"type": "web_search"}]}
    assert placed(hosted, None).messages is not msgs
