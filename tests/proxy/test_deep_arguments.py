"""A call's arguments are a JSON string the client nests as it likes: orjson reads 1,024 levels
but writes 255, and the rules write back what they read (break_loops' call key, prune's shrunk
arguments). Arguments nested between the two are read as no object, never a 500."""

from __future__ import annotations

from pathlib import Path

from rules.activity.observations import load_arguments
from rules.context.shrink import shrink_arguments
from rules.loops.detect import call_key
from tests.conftest import in_process, proxy_settings

DEEP = '{"a":' * 600 + '"' + "x" * 900 + '"' + "}" * 600


def test_arguments_nested_past_what_orjson_writes_are_no_object() -> None:
    assert load_arguments(DEEP) == {}
    assert call_key("edit", DEEP).startswith("edit\x1f")  # the arguments as sent, normalised
    assert shrink_arguments(DEEP, 400) is None
    shallow = '{"a":' * 100 + "1" + "}" * 100
    assert load_arguments(shallow) != {}


async def test_a_request_repeating_a_deeply_nested_call_is_served(tmp_path: Path, edge) -> None:
    calls = []
    for i in range(4):  # the same call, again and again: break_loops keys each
        tid = f"call_{i}"
        fn = {"name": "edit", "arguments": DEEP}
        calls += [
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": tid, "type": "function", "function": fn}]},
            {"role": "tool", "tool_call_id": tid, "content": "Error: no such field"},
        ]  # fmt: skip
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "fix it"}, *calls]}
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    assert edge.last.json()["messages"][1]["tool_calls"][0]["function"]["arguments"] == DEEP
