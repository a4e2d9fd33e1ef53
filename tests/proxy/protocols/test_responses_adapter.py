"""The Responses API adapter, through the real engine (strict): untouched items are forwarded as
the client sent them, broken inputs come out valid in the Responses API's terms (every call has
its output, no output without its call, no reasoning item cut from the item it led to), and the
rules' edits land as patches on the items."""

from __future__ import annotations

import copy
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.protocols.base import TAG
from proxy.protocols.checks import responses_violations
from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine, Rewritten
from rules.messages import HELD
from tests.support.strict_engine import strict_engine

EXEC = {
    "type": "function",
    "name": "exec_command",
    "strict": False,
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}
PATCH_TOOL = {
    "type": "custom",
    "name": "apply_patch",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
}


def body(*items: Any, **extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-5",
        "stream": True,
        "input": list(items),
        "tools": [EXEC, PATCH_TOOL, {"type": "web_search", "external_web_access": True}],
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "thread-1",
        **extra,
    }


def msg(role: str, text: str, n: int = 0) -> dict[str, Any]:
    """A message item; its id names its text (an id said twice is a turn sent twice)."""
    kind = "output_text" if role == "assistant" else "input_text"
    return {
        "type": "message",
        "id": f"msg_{role}_{n or zlib.crc32(text.encode()):x}",
        "role": role,
        "content": [{"type": kind, "text": text}],
    }


def call(cid: str, cmd: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{cid}",
        "call_id": cid,
        "name": "exec_command",
        "arguments": orjson.dumps({"cmd": cmd}).decode(),
    }


def output(cid: str, text: str = "", code: int = 0) -> dict[str, Any]:
    shown = (
        f"Chunk ID: 1a\nWall time: 0.01 seconds\nProcess exited with code {code}\nOutput:\n{text}"
    )
    return {"type": "function_call_output", "id": f"fco_{cid}", "call_id": cid, "output": shown}


def reasoning(n: int) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": f"rs_{n}",
        "summary": [],
        "content": None,
        "encrypted_content": f"gAAAA{n}secret",
    }


@pytest.fixture
async def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    async with strict_engine(tmp_path) as eng:
        yield eng


async def rewrite(engine: Engine, b: dict[str, Any], now: float = 1000.0) -> Rewritten:
    sent = copy.deepcopy(b)
    out = await engine.rewrite(b, {"session-id": "thread-1"}, now=now, adapter=RESPONSES)
    assert b == sent, "the client's body was mutated"
    assert TAG.encode() not in orjson.dumps(out.body)
    assert responses_violations(out.body) == []
    return out


def same(a: Any, b: Any) -> bool:
    return orjson.dumps(a) == orjson.dumps(b)


async def test_untouched_input_is_the_clients_own_body(engine: Engine) -> None:
    b = body(msg("developer", "You are Codex."), msg("user", "hello"))
    out = await rewrite(engine, b)
    assert out.body is b and out.client_session == "thread-1"
    assert out.report["protocol"] == "responses"


async def test_broken_input_is_forwarded_valid_with_untouched_items_identical(
    engine: Engine,
) -> None:
    items = [
        msg("developer", "You are Codex."),
        msg("user", "make a folder"),
        reasoning(1),
        call("call_1", "mkdir -p /w/demo"),
        output("call_1"),
        call("call_2", "ls /w/demo"),  # never answered
        msg("user", "and then?", 2),
        output("call_ghost", "stale"),  # answers no call
        reasoning(3),  # cut from the call it led to
        msg("user", "go on", 3),
    ]
    b = body(*items)
    out = await rewrite(engine, b)
    fwd = out.body["input"]
    for kept in items[:5]:  # the untouched prefix, item for item
        assert any(same(kept, f) for f in fwd)
    assert [same(a, b) for a, b in zip(items[:5], fwd[:5], strict=True)] == [True] * 5
    synthetic = [
        i for i in fwd if i.get("type") == "function_call_output" and i["call_id"] == "call_2"
    ]
    assert len(synthetic) == 1 and fwd.index(synthetic[0]) == fwd.index(items[5]) + 1
    assert not any(i.get("call_id") == "call_ghost" for i in fwd)
    assert "stale" in orjson.dumps(fwd).decode()  # the orphan's text is kept, as a message
    assert not any(same(i, reasoning(3)) for i in fwd)
    kinds = {r["kind"] for r in out.report["repairs"]}
    assert {"reasoning_orphaned", "unanswered_call", "orphan_result"} <= kinds


async def test_encrypted_reasoning_is_pruned_around_and_kept_with_its_call(
    engine: Engine,
) -> None:
    """Codex sends every reasoning item back with its encrypted content: pruning goes on around
    them (old outputs masked in place, or whole turns dropped), every reasoning item that stays is
    the client's bytes, directly before the call it led to, and entities are still tracked."""
    engine.budget_override = 2000
    engine._budgets.clear()
    items: list[Any] = [msg("user", "build it")]
    for n in range(10):
        items += [
            reasoning(n),
            call(f"call_{n}", f"cat big{n}.log"),
            output(f"call_{n}", "x\n" * 400),
        ]
    items += [
        call("call_m", "mkdir -p /w/new_dir"),
        output("call_m"),
        msg("user", "delete the folder you just created", 9),
    ]
    out = await rewrite(engine, body(*items))
    assert not out.report["prune"].get("skipped")
    assert out.report["tokens"]["after"] < out.report["tokens"]["before"]
    fwd = out.body["input"]
    for k, item in enumerate(fwd):
        if item.get("type") == "reasoning":
            n = int(item["id"][3:])
            assert same(item, reasoning(n))
            assert fwd[k + 1]["type"] == "function_call" and fwd[k + 1]["call_id"] == f"call_{n}"
    last = fwd[-1]["content"]
    assert same(last[0], items[-1]["content"][0])
    assert "/w/new_dir" in last[-1]["text"] and last[-1]["type"] == "input_text"


async def test_a_provider_compaction_item_means_no_pruning(engine: Engine) -> None:
    engine.budget_override = 500
    engine._budgets.clear()
    items: list[Any] = [{"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAA"}]
    items += [msg("user", "go"), call("c1", "cat a"), output("c1", "y\n" * 400)]
    items.append(msg("user", "next", 1))
    out = await rewrite(engine, body(*items))
    assert out.report["prune"]["skipped"] == "provider compaction item"
    assert [same(a, b) for a, b in zip(items, out.body["input"], strict=False)] == [True] * 5


def test_a_rule_s_edits_land_on_the_items() -> None:
    """The lift on its own, with edits as a rule makes them (copies; the tag kept): a custom
    call's arguments go back as raw input, a dropped call takes its reasoning along, a masked
    output is written into the output string."""
    patch = "*** Begin Patch\n*** Add File: a.py\n+x = 1\n*** End Patch"
    items = [
        msg("user", "go"),
        reasoning(1),
        {
            "type": "custom_tool_call",
            "id": "ctc_1",
            "call_id": "call_p",
            "name": "apply_patch",
            "input": patch,
        },
        reasoning(2),
        call("call_2", "ls"),
        {"type": "custom_tool_call_output", "call_id": "call_p", "output": "Success."},
        output("call_2", "a.py"),
    ]
    b = body(*items)
    lowered = RESPONSES.lower(b)
    asst, res_p, res_2 = lowered.messages[1], lowered.messages[2], lowered.messages[3]
    assert orjson.loads(asst["tool_calls"][0]["function"]["arguments"]) == {"input": patch}
    new_args = orjson.dumps({"input": "*** Begin Patch\n[ctxproxy: 40 characters elided]"}).decode()
    kept_call = {
        **asst["tool_calls"][0],
        "function": {"name": "apply_patch", "arguments": new_args},
    }
    edited = [
        lowered.messages[0],
        {**asst, "tool_calls": [kept_call]},  # call_2 dropped
        res_p,
        {**res_2, "content": "[ctxproxy: elided]"},
    ]
    out = RESPONSES.lift(b, lowered, edited)["input"]
    assert same(out[0], items[0]) and same(out[1], items[1])  # reasoning 1 led to the kept call
    assert out[2]["input"] == "*** Begin Patch\n[ctxproxy: 40 characters elided]"
    assert {k: v for k, v in out[2].items() if k != "input"} == {
        k: v for k, v in items[2].items() if k != "input"
    }
    assert not any(
        i.get("id") in ("rs_2", "fc_call_2") for i in out
    )  # reasoning 2 went with its call
    assert same(out[3], items[5])
    assert out[4] == {**items[6], "output": "[ctxproxy: elided]"}


async def test_string_input_stays_a_string_when_only_its_text_changes(engine: Engine) -> None:
    b = {"model": "gpt-5", "input": "hello there", "instructions": "Be brief."}
    out = await rewrite(engine, b)
    assert isinstance(out.body["input"], str)
    assert out.body["instructions"] == "Be brief."


async def test_server_side_items_alone_are_not_an_empty_turn(engine: Engine) -> None:
    b = body(
        msg("user", "search"),
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        msg("user", "and?", 1),
    )
    out = await rewrite(engine, b)
    assert out.body is b
    assert not out.report.get("repairs")


def held_marker_absent(out: Rewritten) -> None:
    assert HELD.encode() not in orjson.dumps(out.body)


@pytest.mark.parametrize(
    "history",
    [{"previous_response_id": "resp_1"}, {"conversation": "conv_1"}, {}],
    ids=["previous_response_id", "conversation", "item_reference"],
)
async def test_outputs_of_calls_the_provider_holds_are_neither_repaired_nor_pruned(
    engine: Engine, history: dict[str, Any]
) -> None:
    """The call an output answers is in the provider's own history (a stored response or
    conversation, or the item an ``item_reference`` stands for): the output is forwarded as
    sent, under a budget that would otherwise cut, and nothing is reported repaired."""
    engine.budget_override = 500
    engine._budgets.clear()
    items: list[Any] = [] if history else [{"type": "item_reference", "id": "fc_stored"}]
    items += [output("call_held", "y\n" * 400), msg("user", "go"), call("c1", "cat a")]
    items += [output("c1", "z\n" * 400), msg("user", "next", 1)]
    b = body(*items, **history)
    out = await rewrite(engine, b)
    assert out.body["input"] == items
    assert out.report["repairs"] == []
    assert out.report["prune"]["skipped"] in ("previous_response_id", "conversation",
                                              "provider-held call")  # fmt: skip
    held_marker_absent(out)


async def test_an_output_is_held_only_where_the_provider_keeps_history(engine: Engine) -> None:
    """The same items in one session, with and without a stored response to continue: the
    lowering kept from one request is not the other's (the output is repaired without one)."""
    items = [output("call_held", "done"), msg("user", "go")]
    plain = await rewrite(engine, body(*items), now=1000.0)
    assert [r["kind"] for r in plain.report["repairs"]] == ["orphan_result"]
    stored = await rewrite(engine, body(*items, previous_response_id="resp_1"), now=1001.0)
    assert stored.body["input"] == items and stored.report["repairs"] == []
    again = await rewrite(engine, body(*items, msg("user", "more", 2)), now=1002.0)
    assert [r["kind"] for r in again.report["repairs"]] == ["orphan_result"]
    for out in (plain, stored, again):
        held_marker_absent(out)


async def test_an_output_after_an_item_reference_in_a_later_request_is_held(
    engine: Engine,
) -> None:
    """The reference comes in one request, the output in the session's next: what the first
    lowered is taken over, and the output still counts the reference before it."""
    first = [msg("user", "go"), {"type": "item_reference", "id": "fc_stored"}]
    await rewrite(engine, body(*first), now=1000.0)
    items = [*first, output("call_held", "done"), msg("user", "next", 1)]
    out = await rewrite(engine, body(*items), now=1001.0)
    assert out.body["input"] == items and out.report["repairs"] == []


async def test_odd_outputs_with_stored_history_are_repaired_not_flattened(engine: Engine) -> None:
    """A second output for one held call, and an output whose call_id is not a string: each
    repaired as before (kept as text), the rest of the chain forwarded as sent."""
    items = [msg("user", "go"), call("c1", "ls"), output("c1", "a")]
    items += [output("call_held", "x"), output("call_held", "x2")]
    items += [{**output("c9"), "call_id": ["not", "a", "string"]}, msg("user", "next", 1)]
    out = await rewrite(engine, body(*items, previous_response_id="resp_1"))
    fwd = out.body["input"]
    assert fwd[:4] == items[:4]
    assert [r["kind"] for r in out.report["repairs"]] == ["orphan_result", "orphan_result"]
    assert "x2" in orjson.dumps(fwd[4]).decode() and fwd[4]["type"] == "message"
    held_marker_absent(out)


def test_a_body_of_many_outputs_without_calls_looks_for_references_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each output whose call no earlier item makes asks whether an item_reference came
    before it: the items are walked once for all of them, not once each."""
    import proxy.protocols.responses_parts as parts

    looked = []
    real = parts.kind
    monkeypatch.setattr(parts, "kind", lambda item: looked.append(1) or real(item))
    n = 2_000
    items = [msg("user", "go"), *(output(f"call_{i}") for i in range(n))]
    RESPONSES.lower(body(*items))
    responses_violations(body(*items))
    assert len(looked) <= 2 * (n + 1)
