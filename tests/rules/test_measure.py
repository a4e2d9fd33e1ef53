"""measure: sizes per section, before and after; it never changes the conversation."""

from __future__ import annotations

import pytest

from proxy.tokens import TiktokenCounter
from rules import measure
from rules.base import Context
from rules.messages import INJECT_CLOSE, INJECT_OPEN, PLACEHOLDER_PREFIX
from tests.support.factories import assistant, call, result, system, user

TOKENS = TiktokenCounter("o200k_base")
BLOCK = f"{INJECT_OPEN}\nRecent context:\n- folder ~/a (created)\n{INJECT_CLOSE}"


def sizes(messages, tools=None):
    return measure.measure_sections(messages, tools, TOKENS)


@pytest.mark.parametrize(
    ("message", "section"),
    [
        (system("be brief"), "system"),
        ({"role": "developer", "content": "rules"}, "system"),
        (user("hello there"), "user"),
        (assistant("I will look"), "assistant"),
        (result("c1", "file contents here"), "tool_results"),
        (result("c1", f"{PLACEHOLDER_PREFIX} elided bash result]"), "placeholders"),
        ({"role": "user", "content": [{"type": "text", "text": "part one"}]}, "user"),
    ],
)
def test_each_role_lands_in_its_section(message, section) -> None:
    got = sizes([message])
    assert got[section] > 0
    assert sum(v for k, v in got.items() if k != section) == 0


def test_tool_calls_and_injected_blocks_are_their_own_sections() -> None:
    got = sizes(
        [assistant("ok", call("c1", "bash", command="ls -la")), user("delete it\n\n" + BLOCK)]
    )
    assert got["tool_calls"] == TOKENS.count_text("bash") + TOKENS.count_text(
        '{"command":"ls -la"}'
    )
    assert got["injected"] == TOKENS.count_text(BLOCK)
    assert got["user"] == TOKENS.count_text("delete it\n\n")


def test_tools_schema_counted() -> None:
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    assert sizes([user("x")], tools)["tools"] > 0


def test_apply_reports_before_and_after_and_changes_nothing() -> None:
    original = [user("hi"), assistant("hello")]
    forwarded = [user("hi\n\n" + BLOCK), assistant("hello")]
    ctx = Context(
        messages=forwarded, original_messages=original, model="gpt-4o", tokens=TOKENS, now=0.0
    )
    out = measure.apply(ctx, measure.Config())
    assert out.messages is forwarded and out.state is ctx.state
    sections = out.report["sections"]
    assert sections["injected"] == {"before": 0, "after": TOKENS.count_text(BLOCK)}
    assert sections["user"] == {
        "before": TOKENS.count_text("hi"),
        "after": TOKENS.count_text("hi\n\n"),
    }
    assert set(sections) == set(measure.SECTIONS)
