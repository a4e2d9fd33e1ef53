"""A message of several text blocks (an Anthropic system prompt or assistant turn, a Gemini user
turn or system instruction, a Responses message) is lowered as their texts joined by blank lines;
an edit of that text goes back block by block: each block keeps its place and its other keys
(``cache_control``), so a client's cache breakpoint never moves. Driven through the adapters
directly, the edit made by hand as a rule makes it (a copy with new content)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.anthropic_parts import is_text, text_block
from proxy.protocols.base import TAG
from proxy.protocols.gemini import GEMINI
from proxy.protocols.patching import patch_joined
from proxy.protocols.responses import RESPONSES

MOJ = "Ã¼berprÃ¼fen"
FIXED = "überprüfen"
CC = {"type": "ephemeral"}
USE = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "/a"}}


def _edit(messages: list[Any], role: str, change: Callable[[str], str]) -> list[Any]:
    """The chat view with the content of its messages of ``role`` changed (a copy, tag kept)."""
    out = []
    for m in messages:
        if m.get("role") == role and isinstance(m.get("content"), str):
            m = {**m, "content": change(m["content"])}
        out.append(m)
    return out


def _fix(text: str) -> str:
    return text.replace(MOJ, FIXED)


def _anthropic(body: dict[str, Any], role: str, change: Callable[[str], str]) -> dict[str, Any]:
    lowered = ANTHROPIC.lower(body)
    fwd = ANTHROPIC.lift(body, lowered, _edit(lowered.messages, role, change))
    assert TAG not in str(fwd)
    return fwd


def test_an_edit_of_the_second_system_block_stays_in_it_with_its_breakpoint() -> None:
    system = [{"type": "text", "text": "You are a coding agent.", "cache_control": CC},
              {"type": "text", "text": f"Project notes: {MOJ}", "cache_control": CC}]  # fmt: skip
    body = {"model": "claude-x", "max_tokens": 10, "system": system,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    out = _anthropic(body, "system", _fix)["system"]
    assert out[0] is system[0]
    assert out[1] == {"type": "text", "text": f"Project notes: {FIXED}", "cache_control": CC}
    assert len(out) == 2


def test_an_assistant_turns_text_blocks_keep_their_places_around_the_call() -> None:
    turn = [{"type": "text", "text": "Reading the file."}, USE,
            {"type": "text", "text": f"then {MOJ}", "cache_control": CC}]  # fmt: skip
    body = {"model": "claude-x", "max_tokens": 10, "messages": [
        {"role": "user", "content": "read"},
        {"role": "assistant", "content": turn},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "ok"}]},
    ]}  # fmt: skip
    out = _anthropic(body, "assistant", _fix)["messages"][1]["content"]
    assert out[0] is turn[0] and out[1] is USE
    assert out[2] == {"type": "text", "text": f"then {FIXED}", "cache_control": CC}
    assert len(out) == 3


def test_a_note_appended_to_an_assistant_turn_is_a_block_after_its_texts() -> None:
    turn = [{"type": "text", "text": "Reading.", "cache_control": CC}, USE]
    body = {"model": "claude-x", "max_tokens": 10, "messages": [
        {"role": "user", "content": "read"},
        {"role": "assistant", "content": turn},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "ok"}]},
    ]}  # fmt: skip
    out = _anthropic(body, "assistant", lambda t: f"{t}\n\nnote")["messages"][1]["content"]
    assert out == [turn[0], {"type": "text", "text": "note"}, USE]
    assert out[0] is turn[0]


def test_a_replacement_spanning_blocks_keeps_a_breakpoint_on_the_text_standing_there() -> None:
    system = [{"type": "text", "text": "one"},
              {"type": "text", "text": "two", "cache_control": CC}]  # fmt: skip
    body = {"model": "claude-x", "max_tokens": 10, "system": system,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    out = _anthropic(body, "system", lambda t: "all new")["system"]
    assert out == [{"type": "text", "text": "all new", "cache_control": CC}]


def test_gemini_user_parts_and_system_parts_are_edited_in_place() -> None:
    parts = [{"text": "first"}, {"text": f"second {MOJ}", "extra": 1}]
    system = {"parts": [{"text": "be brief"}, {"text": f"rule {MOJ}"}]}
    body = {"contents": [{"role": "user", "parts": parts}], "systemInstruction": system}
    lowered = GEMINI.lower(body)
    edited = _edit(_edit(lowered.messages, "user", _fix), "system", _fix)
    fwd = GEMINI.lift(body, lowered, edited)
    out = fwd["contents"][0]["parts"]
    assert out[0] is parts[0]
    assert out[1] == {"text": f"second {FIXED}", "extra": 1}
    assert fwd["systemInstruction"]["parts"] == [system["parts"][0], {"text": f"rule {FIXED}"}]


def test_responses_message_parts_are_edited_in_place() -> None:
    content = [{"type": "input_text", "text": "first"},
               {"type": "input_text", "text": f"second {MOJ}"}]  # fmt: skip
    body = {"model": "gpt-5", "input": [{"role": "user", "content": content}]}
    lowered = RESPONSES.lower(body)
    fwd = RESPONSES.lift(body, lowered, _edit(lowered.messages, "user", _fix))
    out = fwd["input"][0]["content"]
    assert out[0] is content[0]
    assert out[1] == {"type": "input_text", "text": f"second {FIXED}"}


@pytest.mark.parametrize(
    ("old_texts", "new"),
    [
        (["a\nb", "c"], "a\nB\n\nc"),
        (["a", "b", "c"], "a\n\nb\n\nC"),
        (["a\nb\nc", "d"], "a\nc\n\nd"),
        (["a", "b"], "x"),
        (["a", "b"], "a b"),
        (["a", "", "b"], "a\n\n\n\nB"),
    ],
)
def test_the_blocks_always_spell_the_new_text(old_texts: list[str], new: str) -> None:
    blocks: list[Any] = []
    for t in old_texts:
        blocks += [{"type": "text", "text": t, "cache_control": CC}, USE]
    old = "\n\n".join(old_texts)
    out = patch_joined(blocks, old, new, is_text, text_block)
    assert "\n\n".join(b["text"] for b in out if is_text(b)) == new
    assert [b for b in out if b is USE] == [USE] * len(old_texts)
    assert any("cache_control" in b for b in out if is_text(b))
