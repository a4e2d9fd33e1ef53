"""A model turn's function responses sent over several user contents. Gemini pairs a turn's N
calls with the N responses of the content right after it, so a client that sends each response
as its own content would get a 400 on every retry; before, the later responses were taken for
orphans (made text) and their calls marked interrupted, losing what the tools returned. The
run of user contents is now forwarded as one, its responses first, in the calls' order. A
response the chain repair moves next to its call is written naming that call."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_gemini_adapter import (
    body,
    call,
    model,
    response,
    responses_of,
    rewrite,
    user,
)


def _texts(content: dict[str, Any]) -> list[str]:
    return [p["text"] for p in content["parts"] if "text" in p]


@pytest.mark.parametrize("ids", [True, False])
@pytest.mark.parametrize("between", [[], [user("and then")]], ids=["adjacent", "with-text-between"])
async def test_split_responses_are_forwarded_as_one_content(
    engine: Engine, ids: bool, between: list[dict[str, Any]]
) -> None:
    a, b_ = ("c1", "c2") if ids else (None, None)
    b = body(
        user("list the files and print the directory"),
        model(call(a, "ls"), call(b_, "pwd")),
        user(response(a, "a.py")),
        *between,
        user(response(b_, "/tmp")),
    )
    out = await rewrite(engine, b)  # checks the forwarded pairing
    contents = out.body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    answers = responses_of(contents[2])
    assert [r["response"]["output"] for r in answers] == ["a.py", "/tmp"]
    assert _texts(contents[2]) == ["and then"] * len(between)
    assert contents[0] is b["contents"][0] and contents[1] is b["contents"][1]
    assert any(r["kind"] == "responses_split" for r in out.report["repairs"])


async def test_responses_after_the_turn_answered_are_still_orphans(engine: Engine) -> None:
    # the calls were answered in the content right after them: a later content's response to
    # the same name answers nothing, and becomes text
    b = body(
        user("list the files"),
        model(call(None, "ls")),
        user(response(None, "a.py")),
        user(response(None, "b.py")),
    )
    out = await rewrite(engine, b)
    contents = out.body["contents"]
    assert [r["response"]["output"] for c in contents for r in responses_of(c)] == ["a.py"]
    assert any("b.py" in t for c in contents for t in _texts(c))


async def test_a_response_moved_next_to_its_call_names_it(engine: Engine) -> None:
    # a response sent before the call its id names is moved after that call by the chain
    # repair; Gemini refuses a response that names another tool than its call
    early = {"functionResponse": {"id": "call-0", "name": "run_shell_command",
                                  "response": {"output": "x"}}}  # fmt: skip
    late_call = {"functionCall": {"id": "call-0", "name": "read_file", "args": {"path": "a"}}}
    b = body(user("the task"), user(early), model(late_call), user("continue"))
    out = await rewrite(engine, b)  # checks the forwarded pairing (names included)
    answers = [r for c in out.body["contents"] for r in responses_of(c)]
    assert [(r["id"], r["name"]) for r in answers] == [("call-0", "read_file")]
