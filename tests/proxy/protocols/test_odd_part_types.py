"""A part whose ``type`` is not a string (a list, an object) is the client's mistake: read as a
part of an unknown kind, never a crash (a lookup of such a type in a set raised ``TypeError``,
answered 500)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.base import Adapter
from proxy.protocols.body import BadRequest
from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine
from tests.conftest import in_process, proxy_settings

ODD = (["input_image"], {"a": 1})


def responses(odd: Any) -> dict[str, Any]:
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": [{"type": odd}]}
    user = {"role": "user", "content": [{"type": odd, "text": "x"}]}
    return {"model": "gpt-4o", "input": [{"role": "user", "content": "go"}, call, output, user]}


def anthropic(odd: Any) -> dict[str, Any]:
    use = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": odd}]}
    messages = [
        {"role": "user", "content": [{"type": odd, "text": "go"}]},
        {"role": "assistant", "content": [{"type": odd}, use]},
        {"role": "user", "content": [result, {"type": odd}]},
    ]
    return {"model": "claude-x", "max_tokens": 10, "messages": messages}


@pytest.mark.parametrize("odd", ODD)
@pytest.mark.parametrize(("make", "adapter"), [(responses, RESPONSES), (anthropic, ANTHROPIC)])
async def test_a_part_typed_with_a_list_or_an_object_is_no_crash(
    engine: Engine, make: Any, adapter: Adapter, odd: Any
) -> None:
    try:
        out = await engine.rewrite(make(odd), {}, now=1000.0, adapter=adapter, model="m")
    except BadRequest:
        return  # refused in the client's protocol: as good
    assert out.body


ROUTES = {
    "/v1/messages": {"model": "claude-x", "max_tokens": 16},
    "/v1/messages/count_tokens": {"model": "claude-x"},
    "/v1/responses": {"model": "gpt-4o"},
}


@pytest.mark.parametrize("odd", ODD)
@pytest.mark.parametrize("path", ROUTES)
async def test_a_role_given_as_a_list_or_an_object_is_a_400(
    tmp_path: Path, path: str, odd: Any
) -> None:
    """Refused in the protocol's own shape, naming the field (a set lookup raised TypeError:
    500 and a traceback)."""
    array = "input" if path == "/v1/responses" else "messages"
    body = {**ROUTES[path], array: [{"role": odd, "content": "hi"}]}
    settings = proxy_settings("http://127.0.0.1:9/v1")  # never reached
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post(path, json=body, headers={"authorization": "Bearer k"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert f"{array}[0].role" in error["message"]
