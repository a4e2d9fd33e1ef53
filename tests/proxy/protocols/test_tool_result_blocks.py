"""A tool result holding several blocks (Anthropic ``tool_result.content``, Responses
``function_call_output.output``) is lowered as its texts joined by line breaks; an edit of that
text goes back block by block: each text block keeps its own text, edited in place, and its other
keys (``cache_control``); the non-text blocks stay where they were. Driven through the adapters
directly, the edit made by hand as a rule makes it (a copy with new content)."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.base import TAG
from proxy.protocols.patching import patch_blocks, patch_texts
from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine
from rules.messages import text_of

MOJ = "Ã¼berprÃ¼fen done"
FIXED = "überprüfen done"
IMG = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO="}}
CC = {"type": "ephemeral"}


def _edit(messages: list[Any], change: Any) -> list[Any]:
    """The chat view with its tool message's content changed by ``change`` (a copy, tag kept)."""
    out = []
    for m in messages:
        if m.get("role") == "tool":
            m = {**m, "content": change(m["content"])}
        out.append(m)
    return out


def _anthropic_body(blocks: list[Any]) -> dict[str, Any]:
    """A Messages request whose one tool result holds ``blocks`` (a run's output: a file read's
    is left as the file holds it)."""
    return {
        "model": "claude-x",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "read"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "go"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": blocks}]},
        ],
    }  # fmt: skip


def _anthropic(blocks: list[Any], change: Any) -> list[Any]:
    body = _anthropic_body(blocks)
    lowered = ANTHROPIC.lower(body)
    fwd = ANTHROPIC.lift(body, lowered, _edit(lowered.messages, change))
    assert TAG not in str(fwd)
    result = fwd["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    return result["content"]  # type: ignore[no-any-return]


def _responses(blocks: list[Any], change: Any) -> list[Any]:
    body = {
        "model": "gpt-5",
        "input": [
            {"role": "user", "content": "read"},
            {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": blocks},
        ],
    }
    lowered = RESPONSES.lower(body)
    fwd = RESPONSES.lift(body, lowered, _edit(lowered.messages, change))
    item = fwd["input"][2]
    assert item["type"] == "function_call_output" and item["call_id"] == "call_1"
    return item["output"]  # type: ignore[no-any-return]


def test_an_encoding_fix_stays_in_its_block_before_the_image_with_its_breakpoint() -> None:
    blocks = [{"type": "text", "text": "first part"}, IMG,
              {"type": "text", "text": MOJ, "cache_control": CC}]  # fmt: skip
    out = _anthropic(blocks, lambda t: t.replace(MOJ, FIXED))
    assert out[0] is blocks[0]  # untouched: the client's own block
    assert out[1] is IMG
    assert out[2] == {"type": "text", "text": FIXED, "cache_control": CC}
    assert len(out) == 3


def test_responses_output_parts_keep_their_places() -> None:
    image = {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}
    blocks = [{"type": "input_text", "text": "first part"}, image,
              {"type": "input_text", "text": MOJ}]  # fmt: skip
    out = _responses(blocks, lambda t: t.replace(MOJ, FIXED))
    assert out == [blocks[0], image, {"type": "input_text", "text": FIXED}]
    assert out[0] is blocks[0] and out[1] is image


def test_edits_in_two_blocks_each_stay_in_theirs() -> None:
    blocks = [{"type": "text", "text": f"a {MOJ}\nsecond line", "cache_control": CC}, IMG,
              {"type": "text", "text": f"x\n{MOJ}", "cache_control": CC}]  # fmt: skip
    out = _anthropic(blocks, lambda t: t.replace(MOJ, FIXED))
    assert out == [
        {"type": "text", "text": f"a {FIXED}\nsecond line", "cache_control": CC},
        IMG,
        {"type": "text", "text": f"x\n{FIXED}", "cache_control": CC},
    ]


def test_a_cut_spanning_blocks_keeps_the_head_and_tail_in_theirs() -> None:
    head = "\n".join(f"head {i}" for i in range(50))
    tail = "\n".join(f"tail {i}" for i in range(50))
    blocks = [{"type": "text", "text": "header"}, IMG,
              {"type": "text", "text": f"{head}\n{tail}", "cache_control": CC}]  # fmt: skip

    def cut(text: str) -> str:  # keeps the first 3 and last 3 lines, as a size cap does
        lines = text.split("\n")
        return "\n".join([*lines[:3], "[... 95 lines elided ...]", *lines[-3:]])

    out = _anthropic(blocks, cut)
    assert out[0] is blocks[0] and out[1] is IMG
    kept = "head 0\nhead 1\n[... 95 lines elided ...]\ntail 47\ntail 48\ntail 49"
    assert out[2] == {"type": "text", "text": kept, "cache_control": CC}
    assert text_of(out) == cut(text_of(blocks))


def test_a_block_left_without_text_hands_its_breakpoint_to_the_one_before() -> None:
    blocks = [{"type": "text", "text": "one\ntwo"}, IMG,
              {"type": "text", "text": "three\nfour", "cache_control": CC},
              {"type": "text", "text": "five"}]  # fmt: skip
    out = _anthropic(blocks, lambda t: "one\n[elided]\nfive")
    assert out == [
        {"type": "text", "text": "one\n[elided]", "cache_control": CC},
        IMG,
        blocks[3],
    ]


def test_an_appended_note_is_a_block_of_its_own_after_the_clients() -> None:
    blocks = [
        {"type": "text", "text": "out"},
        IMG,
        {"type": "text", "text": "end", "cache_control": CC},
    ]
    out = _anthropic(blocks, lambda t: f"{t}\n\n<note>looping</note>")
    assert out[:3] == blocks and all(a is b for a, b in zip(out, blocks, strict=False))
    assert out[3] == {"type": "text", "text": "<note>looping</note>"}


@pytest.mark.parametrize(
    ("old_texts", "new"),
    [
        (["a\nb", "c"], "a\nB\nc"),
        (["a", "b", "c"], "x"),
        (["a", "b", "c"], "a\nnew\nnew2\nb\nc"),
        (["", "b"], "z\nb"),
        (["a\nb\nc", "d\ne"], "a\ne"),
        (["a", "b"], "q\nr\ns\nt"),
    ],
)
def test_the_blocks_always_spell_the_new_text(old_texts: list[str], new: str) -> None:
    blocks: list[Any] = []
    for t in old_texts:
        blocks += [{"type": "text", "text": t}, IMG]
    out = patch_texts(blocks, text_of(blocks), new, lambda b: b.get("type") == "text",
                      lambda t: {"type": "text", "text": t})  # fmt: skip
    assert text_of(out) == new
    assert [b for b in out if b is IMG] == [IMG] * len(old_texts)


async def test_the_encoding_fix_through_the_engine_keeps_the_blocks(engine: Engine) -> None:
    blocks = [{"type": "text", "text": "first part"}, IMG,
              {"type": "text", "text": MOJ, "cache_control": CC}]  # fmt: skip
    body = _anthropic_body(blocks)
    out = await engine.rewrite(body, {}, now=1000.0, adapter=ANTHROPIC, model="claude-x")
    inner = out.body["messages"][2]["content"][0]["content"]
    assert inner == [blocks[0], IMG, {"type": "text", "text": FIXED, "cache_control": CC}]


def _search_result(text: str, **kw: Any) -> dict[str, Any]:
    inner = [{"type": "text", "text": text}]
    return {"type": "search_result", "source": "https://kb/x", "title": "KB", "content": inner,
            "citations": {"enabled": True}, **kw}  # fmt: skip


@pytest.mark.parametrize("lead", [[], [{"type": "text", "text": "Results:"}]])
def test_a_search_results_text_is_edited_in_its_own_content(lead: list[Any]) -> None:
    """A ``search_result`` is read for its nested content: the edit goes there, not beside it
    (a copy beside it sent its text twice)."""
    blocks = [*lead, _search_result(MOJ, cache_control=CC)]
    out = _anthropic(blocks, lambda t: t.replace(MOJ, FIXED))
    assert out == [*lead, _search_result(FIXED, cache_control=CC)]
    assert text_of(out).count(FIXED) == 1


def test_a_cut_of_a_search_result_shrinks_it() -> None:
    text = "\n".join(f"line {i} lorem ipsum" for i in range(400))
    out = _anthropic([_search_result(text)], lambda t: "\n".join(t.split("\n")[:3]) + "\n[cut]")
    assert len(out) == 1 and out[0]["type"] == "search_result"
    assert out[0]["content"] == [{"type": "text", "text": "line 0 lorem ipsum\nline 1 lorem "
                                  "ipsum\nline 2 lorem ipsum\n[cut]"}]  # fmt: skip


def test_a_rewrite_of_all_of_it_keeps_the_first_search_result_and_the_image() -> None:
    blocks = [_search_result("a\nb", cache_control=CC), IMG, _search_result("c")]
    out = _anthropic(blocks, lambda t: "entirely new")
    assert out == [_search_result("entirely new", cache_control=CC), IMG]


def test_a_whole_rewrite_stands_in_a_search_results_place_not_beside_it() -> None:
    """``patch_blocks`` (where blocks do not spell the old text): the new text replaces the
    search result, which held the text it stands for."""
    blocks = [_search_result("old", cache_control=CC), IMG]
    out = patch_blocks(blocks, "old text", "new", lambda b: b.get("type") == "text",
                       lambda t: {"type": "text", "text": t})  # fmt: skip
    assert out == [{"type": "text", "text": "new", "cache_control": CC}, IMG]
