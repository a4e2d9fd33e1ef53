"""The Anthropic Messages adapter, through the real engine (strict: a rule that raises fails the
test): what the rules did not change is forwarded as the client's own objects, byte for byte;
broken histories come out valid in Anthropic's terms; the rules' edits land as patches."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.anthropic_mend import EMPTY_TEXT
from proxy.protocols.base import TAG
from proxy.protocols.checks import anthropic_violations
from proxy.rewrite.engine import Engine, Rewritten

SIG = "EqQBCkYIBxgCKkD+signature+bytes=="
BASH = {
    "name": "Bash",
    "description": "Run a shell command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-opus-5-5",
        "max_tokens": 1024,
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.330.031;"},
            {
                "type": "text",
                "text": "You are a careful agent.",
                "cache_control": {"type": "ephemeral"},
            },
        ],
        "tools": [BASH],
        "metadata": {"user_id": '{"device_id":"ab","account_uuid":"","session_id":"s-1"}'},
        "messages": list(messages),
        **extra,
    }


def user(*blocks: Any) -> dict[str, Any]:
    return {
        "role": "user",
        "content": list(blocks)
        if len(blocks) != 1 or not isinstance(blocks[0], str)
        else blocks[0],
    }


def text(t: str, **kw: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **kw}


def thinking(t: str = "Let me think.") -> dict[str, Any]:
    return {"type": "thinking", "thinking": t, "signature": SIG}


def tool_use(uid: str, command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": uid, "name": "Bash", "input": {"command": command}}


def result(uid: str, content: Any = "made", **kw: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": uid, "content": content, **kw}


def assistant(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


async def rewrite(
    engine: Engine, b: dict[str, Any], now: float = 1000.0, headers: dict[str, str] | None = None
) -> Rewritten:
    sent = copy.deepcopy(b)
    out = await engine.rewrite(b, headers or {}, now=now, adapter=ANTHROPIC)
    assert b == sent, "the client's body was mutated"
    assert TAG.encode() not in orjson.dumps(out.body)
    assert anthropic_violations(out.body) == []
    return out


def same(a: Any, b: Any) -> bool:
    return orjson.dumps(a) == orjson.dumps(b)


async def test_a_request_the_rules_leave_alone_is_the_clients_own_body(engine: Engine) -> None:
    b = body(user(text("<system-reminder>git</system-reminder>"), text("hello")))
    out = await rewrite(engine, b)
    assert out.body is b
    assert out.report["protocol"] == "anthropic"
    assert out.client_session == "s-1"  # from metadata.user_id's JSON


async def test_broken_history_is_forwarded_valid_with_untouched_blocks_identical(
    engine: Engine,
) -> None:
    first = user("make a folder")
    turn = assistant(thinking(), text("I'll create it."), tool_use("toolu_1", "mkdir -p demo"))
    answered = user(result("toolu_1", [text("made", cache_control={"type": "ephemeral"})]))
    split_thinking = assistant(thinking("Next step."))  # cut from the tool_use it led to
    split_call = assistant(tool_use("toolu_2", "ls demo"))
    unanswered_then_user = user(text("and list it"))  # toolu_2 never answered
    orphan = user(
        result("toolu_ghost", "stale output"),
        text("", cache_control={"type": "ephemeral"}),
        text("go on"),
    )
    b = body(
        first,
        turn,
        answered,
        split_thinking,
        split_call,
        unanswered_then_user,
        assistant(text("Listed.")),
        orphan,
    )
    out = await rewrite(engine, b)
    fwd = out.body["messages"]
    # the untouched turns are the client's bytes
    assert same(fwd[0], first) and same(fwd[1], turn) and same(fwd[2], answered)
    # the thinking block rejoined its turn, signature intact, ahead of the tool_use
    rejoined = fwd[3]
    assert rejoined["content"][0] == thinking("Next step.")
    assert (
        rejoined["content"][1]["type"] == "tool_use" and rejoined["content"][1]["id"] == "toolu_2"
    )
    # toolu_2 answered first thing in the next user message, the user's text after it
    nxt = fwd[4]["content"]
    assert nxt[0]["type"] == "tool_result" and nxt[0]["tool_use_id"] == "toolu_2"
    assert same(nxt[-1], text("and list it"))
    # the orphan result became readable text (never lost), the empty block is gone
    tail = orjson.dumps(fwd[-2:]).decode()
    assert "stale output" in tail and "toolu_ghost" in tail and '"go on"' in tail
    assert '"tool_result","tool_use_id":"toolu_ghost"' not in tail
    kinds = {r["kind"] for r in out.report["repairs"]}
    assert {"thinking_rejoined", "empty_text_block"} <= kinds
    assert len(kinds) >= 4  # plus the chain's own: missing result, orphan result


async def test_injected_context_is_a_block_of_its_own_after_the_clients(engine: Engine) -> None:
    turn = assistant(
        text("Creating it."), tool_use("toolu_1", "mkdir -p /work/demo123 && echo made")
    )
    done = user(result("toolu_1", "made"))
    b1 = body(user("make a folder /work/demo123"), turn, done)
    await rewrite(engine, b1, now=1000.0)
    ask = user(text("delete the folder you just created", cache_control={"type": "ephemeral"}))
    b2 = body(user("make a folder /work/demo123"), turn, done, assistant(text("Done.")), ask)
    out = await rewrite(engine, b2, now=1010.0)
    last = out.body["messages"][-1]["content"]
    assert same(last[0], ask["content"][0])  # the client's block, breakpoint and all
    assert last[-1]["type"] == "text" and "<ctxproxy-context>" in last[-1]["text"]
    assert "/work/demo123" in last[-1]["text"]
    marks = orjson.dumps(out.body).count(b'"cache_control"')
    assert marks == orjson.dumps(b2).count(b'"cache_control"')  # no breakpoint of ours


async def test_compaction_patches_results_and_keeps_ids_and_signatures(
    engine: Engine, tmp_path: Path
) -> None:
    engine.budget_override = 6000
    engine._budgets.clear()
    messages: list[dict[str, Any]] = [user("inspect the logs")]
    for n in range(14):
        uid = f"toolu_{n:02d}"
        messages.append(assistant(thinking(f"step {n}"), tool_use(uid, f"cat log{n}.txt")))
        messages.append(user(result(uid, "\n".join(f"line {k} of log {n}" for k in range(120)))))
    messages.append(user("summarise"))
    b = body(*messages)
    out = await rewrite(engine, b)
    fwd = out.body["messages"]
    assert out.report["tokens"]["after"] < out.report["tokens"]["before"]
    sent_ids = [
        blk["id"]
        for m in messages
        for blk in m["content"]
        if isinstance(m["content"], list) and blk.get("type") == "tool_use"
    ]
    fwd_ids = [
        blk["id"]
        for m in fwd
        if isinstance(m["content"], list)
        for blk in m["content"]
        if blk.get("type") == "tool_use"
    ]
    assert set(fwd_ids) <= set(sent_ids)
    for m in fwd:
        for blk in m["content"] if isinstance(m["content"], list) else []:
            if blk.get("type") == "thinking":
                assert blk["signature"] == SIG
            if blk.get("type") == "tool_use":
                assert blk["input"] == {"command": f"cat log{int(blk['id'][-2:])}.txt"}
    elided = [
        blk
        for m in fwd
        if isinstance(m["content"], list)
        for blk in m["content"]
        if blk.get("type") == "tool_result" and "[ctxproxy:" in orjson.dumps(blk).decode()
    ]
    dropped = [m for m in fwd if "[ctxproxy: dropped" in orjson.dumps(m).decode()]
    assert elided or dropped, "old results were masked in place or dropped"
    assert out.report["tokens"]["after"] <= 6000
    assert "thinking" in out.report["sections"]


async def test_string_and_list_content_keep_their_shape(engine: Engine) -> None:
    b = body(
        user("first, as a string"),
        assistant(text("ok")),
        {
            "role": "system",
            "content": "mid-conversation system text",
            "output_config": {"effort": "medium"},
        },
        user([text("second, as a list")][0]),
    )
    out = await rewrite(engine, b)
    for sent, fwd in zip(b["messages"], out.body["messages"], strict=True):
        assert type(sent["content"]) is type(fwd["content"])
    assert out.body["messages"][2]["output_config"] == {"effort": "medium"}


async def test_the_first_user_message_is_never_altered(engine: Engine) -> None:
    """Claude Code's system[0] carries a check derived from the first user message's text:
    what the rules append to that message goes in a user message of its own after it."""
    turn = assistant(tool_use("toolu_1", "mkdir -p /w/d1 && echo made"))
    lead = {"x-session-id": "lead"}
    await rewrite(
        engine, body(user("make /w/d1"), turn, user(result("toolu_1", "made"))), 1000.0, lead
    )
    # a sub-agent's first request: its only user message is the first one
    first = user(
        text("<system-reminder>git</system-reminder>"), text("delete the folder I just created")
    )
    sub = {"x-session-id": "sub", "x-parent-session-id": "lead"}
    out = await rewrite(engine, body(first), 1010.0, sub)
    fwd = out.body["messages"]
    assert same(fwd[0], first)
    assert len(fwd) == 2 and fwd[1]["role"] == "user"
    assert "<ctxproxy-context>" in fwd[1]["content"][0]["text"]
    assert "/w/d1" in fwd[1]["content"][0]["text"]


async def test_a_turn_of_server_tool_blocks_only_is_not_an_empty_turn(engine: Engine) -> None:
    server_turn = assistant(
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": "x"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
    )
    b = body(user("look it up"), server_turn, user("and?"))
    out = await rewrite(engine, b)
    assert out.body is b
    assert not out.report.get("repairs")


async def test_a_message_of_empty_text_only_gets_the_placeholder_text(engine: Engine) -> None:
    b = body(user("hi"), assistant(text("")), user(text(" "), text("")), user("go on"))
    out = await rewrite(engine, b)
    assert anthropic_violations(out.body) == []
    texts = [blk["text"] for m in out.body["messages"] for blk in m["content"] if "text" in blk]
    assert all(isinstance(t, str) and t.strip() for t in texts)


async def test_a_dropped_empty_blocks_breakpoint_stays_on_the_turn(engine: Engine) -> None:
    """The client's ``cache_control`` ends its cached prefix: an empty text block dropped hands
    it to the block before it (after it, first; never a thinking block), or to the placeholder."""
    cc = {"type": "ephemeral"}
    b = body(
        user("hi"),
        assistant(thinking(), text("said"), text("", cache_control=cc)),
        user(text(" ", cache_control=cc), text("next")),
        assistant(text("ok")),
        user(text("", cache_control=cc)),
    )
    out = await rewrite(engine, b)
    assert anthropic_violations(out.body) == []
    fwd = out.body["messages"]
    assert fwd[1]["content"][1:] == [text("said", cache_control=cc)]
    assert fwd[2]["content"] == [text("next", cache_control=cc)]
    assert fwd[4]["content"] == [text(EMPTY_TEXT, cache_control=cc)]


async def test_a_system_message_loses_its_calls_and_results(engine: Engine) -> None:
    stray = {"role": "system", "content": [text(""), {"type": "tool_result", "tool_use_id": "t9"}]}
    b = body(user("hi"), stray, user("go on"))
    out = await rewrite(engine, b)
    assert anthropic_violations(out.body) == []
    system = out.body["messages"][1]
    assert system["role"] == "system"
    assert system["content"] == []  # its blank text gone too: emptied, as a client empties one
    kinds = {r["kind"] for r in out.report["repairs"]}
    assert "misplaced_block" in kinds


@pytest.mark.parametrize("blank", ["", " ", "\n\t", [text("")], [text(" \n")]], ids=repr)
async def test_a_blank_user_turn_after_an_unanswered_call_is_forwarded_valid(
    engine: Engine, blank: Any
) -> None:
    """The interrupted call gets its result, and the blank words beside it say "(empty)" in any
    form they came: a whitespace-only string is one text block to Anthropic, which it refuses."""
    b = body(
        user("go"), assistant(tool_use("toolu_1", "mkdir -p a")), {"role": "user", "content": blank}
    )
    out = await rewrite(engine, b)
    last = out.body["messages"][-1]["content"]
    assert last[0]["type"] == "tool_result" and last[0]["tool_use_id"] == "toolu_1"
    assert last[1:] == [text(EMPTY_TEXT)]


async def test_a_whitespace_only_user_turn_is_filled_like_an_empty_one(engine: Engine) -> None:
    b = body(user("go"), assistant(text("Yes?")), user(" \n"), assistant(text("Ok.")), user("on"))
    out = await rewrite(engine, b)
    assert out.body["messages"][2] == {"role": "user", "content": EMPTY_TEXT}
    assert [same(a, c) for a, c in zip(b["messages"], out.body["messages"], strict=True)] == [
        True,
        True,
        False,
        True,
        True,
    ]
    assert [r["kind"] for r in out.report["repairs"]] == ["empty_text_block"]


@pytest.mark.parametrize(
    ("inner", "mended"),
    [
        ([text("made a"), text("  ")], [text("made a")]),
        ([text(""), text("\n")], [text(EMPTY_TEXT)]),
        ([text(" ", cache_control={"type": "ephemeral"})],
         [text(EMPTY_TEXT, cache_control={"type": "ephemeral"})]),
    ],
    ids=["one-blank", "all-blank", "blank-with-breakpoint"],
)  # fmt: skip
async def test_a_blank_text_inside_a_tool_result_is_mended(
    engine: Engine, inner: list[Any], mended: list[Any]
) -> None:
    """A tool's empty output as a blank text block inside its ``tool_result``: Anthropic reads
    those blocks as a message's ("text content blocks must contain non-whitespace text")."""
    b = body(
        user("go"),
        assistant(tool_use("toolu_1", "mkdir -p a")),
        user(result("toolu_1", inner), text("on")),
    )
    out = await rewrite(engine, b)
    sent = out.body["messages"][2]["content"]
    assert sent[0] == result("toolu_1", mended)
    assert same(out.body["messages"][0], b["messages"][0])
    assert "empty_text_block" in [r["kind"] for r in out.report["repairs"]]
