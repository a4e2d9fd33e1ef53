"""Calls made at once, several in one assistant message: what they made was made together, so a
mention one of them fits as well as another abstains as ambiguous, as it does for two things one
command made; calls made one after another still resolve to the newer. On Chat Completions'
messages and through the Anthropic and Responses adapters, whose parallel calls lower to one
message."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine
from rules.entities import resolve_refs, track_entities
from tests.support.factories import apply_rules, assistant, ctx, result, shell, system, user
from tests.support.strict_engine import strict_engine

TRACK = (track_entities, track_entities.Config())
RESOLVE = (resolve_refs, resolve_refs.Config())
ASK = "delete the folder you just created"


def _references(*messages: dict[str, Any]) -> list[Any]:
    out = apply_rules(ctx(system(), user("set it up"), *messages, now=1000.0), TRACK, RESOLVE)
    return list(out.report.get("references") or [])


def test_two_folders_made_at_once_are_ambiguous() -> None:
    (ref,) = _references(
        assistant(None, shell("c1", "mkdir alpha"), shell("c2", "mkdir beta")),
        result("c1", ""),
        result("c2", ""),
        assistant("Done."),
        user(ASK),
    )
    assert ref["entity"] is None and ref["abstained"] == "ambiguous"
    assert sorted(ref["candidates"]) == ["alpha", "beta"]


def test_two_folders_made_one_after_another_resolve_to_the_newer() -> None:
    (ref,) = _references(
        assistant(None, shell("c1", "mkdir alpha")),
        result("c1", ""),
        assistant(None, shell("c2", "mkdir beta")),
        result("c2", ""),
        assistant("Done."),
        user(ASK),
    )
    assert ref["pointer"]["id"] == "beta" and ref["confidence"] >= 0.9


def test_a_batch_whose_other_calls_made_other_kinds_still_resolves() -> None:
    (ref,) = _references(
        assistant(
            None,
            shell("c1", "mkdir alpha"),
            shell("c2", "git checkout -b feat/x"),
            shell("c3", "touch notes.md"),
        ),
        result("c1", ""),
        result("c2", "Switched to a new branch 'feat/x'"),
        result("c3", ""),
        assistant("Done."),
        user(ASK),
    )
    assert ref["pointer"]["id"] == "alpha"


def test_a_folder_made_after_a_batch_is_the_newer() -> None:
    (ref,) = _references(
        assistant(None, shell("c1", "mkdir alpha"), shell("c2", "mkdir beta")),
        result("c1", ""),
        result("c2", ""),
        assistant(None, shell("c3", "mkdir gamma")),
        result("c3", ""),
        assistant("Done."),
        user(ASK),
    )
    assert ref["pointer"]["id"] == "gamma"


def test_a_lone_call_reusing_an_id_of_an_earlier_batch_is_the_newer() -> None:
    # clients that number calls per message: call_0 again, alone
    batch = [
        assistant(None, shell("call_0", "mkdir alpha"), shell("call_1", "mkdir beta")),
        result("call_0", ""),
        result("call_1", ""),
    ]
    alone = [assistant(None, shell("call_0", "mkdir gamma")), result("call_0", "")]
    (ref,) = _references(*batch, *alone, assistant("Done."), user(ASK))
    assert ref["pointer"]["id"] == "gamma"


def test_two_batches_of_the_same_ids_are_two() -> None:
    def batch(first: str, second: str) -> list[dict[str, Any]]:
        return [
            assistant(None, shell("call_0", f"mkdir {first}"), shell("call_1", f"mkdir {second}")),
            result("call_0", ""),
            result("call_1", ""),
        ]

    (ref,) = _references(*batch("a1", "b1"), *batch("c1", "d1"), assistant("Done."), user(ASK))
    assert ref["abstained"] == "ambiguous" and sorted(ref["candidates"]) == ["c1", "d1"]


def test_delete_it_after_a_batch_of_two_kinds_is_ambiguous_as_after_one_command() -> None:
    (ref,) = _references(
        assistant(None, shell("c1", "mkdir alpha"), shell("c2", "git checkout -b feat/x")),
        result("c1", ""),
        result("c2", "Switched to a new branch 'feat/x'"),
        assistant("Done."),
        user("ok, delete it"),
    )
    assert ref["entity"] is None and ref["abstained"] == "ambiguous"


def test_an_ordinal_among_things_made_at_once_is_ambiguous() -> None:
    batch = [
        assistant(None, shell("c1", "mkdir alpha"), shell("c2", "mkdir beta")),
        result("c1", ""),
        result("c2", ""),
    ]
    later = [assistant(None, shell("c3", "mkdir gamma")), result("c3", "")]
    asked = [*batch, *later, assistant("Done.")]
    (first,) = _references(*asked, user("delete the first folder you created"))
    assert first["entity"] is None and first["abstained"] == "ambiguous"
    (third,) = _references(*asked, user("delete the third folder you created"))
    assert third["pointer"]["id"] == "gamma"


@pytest.fixture
async def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    async with strict_engine(tmp_path) as eng:
        yield eng


def _anthropic_body(parallel: bool) -> dict[str, Any]:
    def use(cid: str, cmd: str) -> dict[str, Any]:
        return {"type": "tool_use", "id": cid, "name": "Bash", "input": {"command": cmd}}

    def answer(cid: str) -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": cid, "content": ""}

    if parallel:
        turns = [
            {
                "role": "assistant",
                "content": [use("toolu_1", "mkdir alpha"), use("toolu_2", "mkdir beta")],
            },
            {"role": "user", "content": [answer("toolu_1"), answer("toolu_2")]},
        ]
    else:
        turns = [
            {"role": "assistant", "content": [use("toolu_1", "mkdir alpha")]},
            {"role": "user", "content": [answer("toolu_1")]},
            {"role": "assistant", "content": [use("toolu_2", "mkdir beta")]},
            {"role": "user", "content": [answer("toolu_2")]},
        ]
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "set it up"},
            *turns,
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
            {"role": "user", "content": ASK},
        ],
    }


def _responses_body(parallel: bool) -> dict[str, Any]:
    def fc(cid: str, cmd: str) -> dict[str, Any]:
        args = orjson.dumps({"cmd": cmd}).decode()
        return {"type": "function_call", "call_id": cid, "name": "exec_command", "arguments": args}

    def out(cid: str) -> dict[str, Any]:
        return {
            "type": "function_call_output",
            "call_id": cid,
            "output": "Process exited with code 0\nOutput:\n",
        }

    items = (
        [fc("call_1", "mkdir alpha"), fc("call_2", "mkdir beta"), out("call_1"), out("call_2")]
        if parallel
        else [fc("call_1", "mkdir alpha"), out("call_1"), fc("call_2", "mkdir beta"), out("call_2")]
    )
    return {
        "model": "gpt-5",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "set it up"}],
            },
            *items,
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ASK}]},
        ],
        "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}],
    }


@pytest.mark.parametrize("protocol", ["anthropic", "responses"])
@pytest.mark.parametrize("parallel", [True, False])
async def test_through_the_adapters(engine: Engine, protocol: str, parallel: bool) -> None:
    adapter, body = (
        (ANTHROPIC, _anthropic_body(parallel))
        if protocol == "anthropic"
        else (RESPONSES, _responses_body(parallel))
    )
    sent = copy.deepcopy(body)
    out = await engine.rewrite(
        body, {"x-session-id": f"{protocol}-{parallel}"}, now=1000.0, adapter=adapter
    )
    assert body == sent
    (ref,) = out.report["references"]
    if parallel:
        assert ref["entity"] is None and ref["abstained"] == "ambiguous"
    else:
        assert ref["pointer"]["id"] == "beta"
