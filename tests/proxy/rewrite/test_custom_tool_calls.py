"""A custom tool's call in Chat Completions (``{"type": "custom", "custom": {"name", "input"}}``:
free-form input, as GPT-5's ``apply_patch``) is a valid call: forwarded as the client sent it, and
read by the rules as the Responses adapter lowers a ``custom_tool_call`` (its input as
``{"input": …}``), so what the patch made is tracked like any other edit."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from bench.golden import settings_for
from proxy.rewrite.engine import Engine
from proxy.store.sqlite import Store
from proxy.tokens import TokenCounters
from rules.messages import call_arguments, call_name

DONE = "Success. Updated the following files:\nA src/report.py"
PATCH = "*** Begin Patch\n*** Add File: src/report.py\n+print('hi')\n*** End Patch\n"


def custom(cid: str, name: str, text: str) -> dict[str, Any]:
    return {"id": cid, "type": "custom", "custom": {"name": name, "input": text}}


def test_the_rules_read_a_custom_call_as_its_input() -> None:
    call = custom("c1", "apply_patch", PATCH)
    assert call_name(call) == "apply_patch"
    assert call_arguments(call) == {"input": PATCH}


@pytest.mark.asyncio
async def test_a_custom_call_is_forwarded_as_sent_and_its_patch_tracked() -> None:
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "add a report script"},
        {"role": "assistant", "content": None, "tool_calls": [custom("c1", "apply_patch", PATCH)]},
        {"role": "tool", "tool_call_id": "c1", "content": DONE},
        {"role": "assistant", "content": "Added src/report.py."},
        {"role": "user", "content": "now delete the file you just created"},
    ]  # fmt: skip
    store = Store(":memory:", batch_window_s=0)
    await store.open()
    try:
        engine = Engine(settings_for({}), store, TokenCounters(), strict=True)
        body = {"model": "gpt-5", "messages": history}
        before = orjson.dumps(body)
        out = await engine.rewrite(body, {"x-session-id": "s"}, now=1000.0)
        engine.close()
    finally:
        await store.close()
    assert orjson.dumps(body) == before  # the client's request is not mutated
    assert out.report["repairs"] == []
    forwarded = out.body["messages"]
    assert forwarded[:5] == history[:5]  # the call and its result as sent
    assert forwarded[2]["tool_calls"][0]["type"] == "custom"
    assert "src/report.py" in orjson.dumps(out.report["entities"]).decode()
