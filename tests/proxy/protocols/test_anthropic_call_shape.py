"""A ``tool_use`` the chain repair fills in (no ``name``: Anthropic refuses it) is forwarded as
repaired: the repair was reported while the block went as the client sent it."""

from __future__ import annotations

from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_anthropic_adapter import body, result, rewrite


async def test_a_call_without_a_name_is_forwarded_named(engine: Engine) -> None:
    b = body(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "input": {}}]},
        {"role": "user", "content": [result("t1", "ok")]},
    )
    out = await rewrite(engine, b)
    block = out.body["messages"][1]["content"][0]
    assert isinstance(block.get("name"), str) and block["name"]
    assert ("invalid_call", "filled_type_and_name") in [
        (r["kind"], r["action"]) for r in out.report["repairs"]
    ]
