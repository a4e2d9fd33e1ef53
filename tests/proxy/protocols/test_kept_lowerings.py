"""The Anthropic adapter's kept lowerings (``proxy/protocols/kept.py``): a request whose messages
were lowered before gives exactly what a cold adapter gives (lowering, the bytes handed to the
runner, the forwarded body); the store stays within its bound; a hit hands out the kept objects
themselves (the runner's per-object memos of the session know them: nothing changes a lowering in
place, which the strict engine checks after every request of the tests); and nothing done to the
client's body reaches what later requests get."""

from __future__ import annotations

import copy
from typing import Any

import orjson

from proxy.protocols.anthropic import ANTHROPIC, AnthropicAdapter
from proxy.protocols.kept import ENTRY_OVERHEAD_BYTES, KeptLowerings
from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_anthropic_adapter import (
    assistant,
    body,
    result,
    text,
    thinking,
    tool_use,
    user,
)


def conversation() -> dict[str, Any]:
    return body(
        user("Fix the build."),
        assistant(thinking(), text("Looking."), tool_use("toolu_1", "make")),
        user(result("toolu_1", "error: missing ;\n" * 40), text("also check lint")),
        assistant(tool_use("toolu_2", "ruff check"), tool_use("toolu_3", "pytest -q")),
        user(result("toolu_2", [text("All checks passed!")]), result("toolu_3", "1 failed")),
        assistant(text("One test fails.")),
        user(text("Go on.", cache_control={"type": "ephemeral"})),
    )


def again(b: dict[str, Any]) -> dict[str, Any]:
    """The same body as new objects, as the next request brings it."""
    return orjson.loads(orjson.dumps(b))


def sorted_bytes(m: dict[str, Any]) -> bytes:
    return orjson.dumps(m, option=orjson.OPT_SORT_KEYS)


def test_a_hit_lowers_as_a_miss_does() -> None:
    warm = AnthropicAdapter()
    b = conversation()
    cold = AnthropicAdapter().lower(again(b))
    first = warm.lower(again(b))
    assert len(warm.kept) == len(b["messages"])
    hit = warm.lower(again(b))
    for lowered in (first, hit):
        assert lowered.messages == cold.messages
        assert [orjson.dumps(m) for m in lowered.messages] == [
            orjson.dumps(m) for m in cold.messages
        ]  # key order too
        assert lowered.state.parts.keys() == cold.state.parts.keys()
        assert lowered.state.user_tags == cold.state.user_tags
        # what the runner's records are keyed by: the very bytes it would compute itself
        for m, data in zip(lowered.messages, lowered.serialised or [], strict=True):
            assert data is None or data == sorted_bytes(m)
    # each request gets the kept objects themselves (the session's memos know them); the
    # system prompt, lowered from ``system``, is made each time
    pairs = zip(first.messages, hit.messages, strict=True)
    assert all(a is c for a, c in pairs if a["role"] != "system")


def test_a_moved_message_is_lowered_for_its_new_place() -> None:
    adapter = AnthropicAdapter()
    b = conversation()
    adapter.lower(again(b))
    shifted = again(b)
    shifted["messages"] = [user("Before anything else."), assistant(text("OK."))] + shifted[
        "messages"
    ]
    assert adapter.lower(again(shifted)).messages == AnthropicAdapter().lower(shifted).messages


def test_editing_the_client_body_in_place_does_not_poison() -> None:
    """Something downstream editing the forwarded body in place: the kept lowerings share no
    container with the client's body, so the next request lowers as a cold adapter does."""
    adapter = AnthropicAdapter()
    b = conversation()
    client = again(b)
    adapter.lower(client)
    for m in client["messages"]:
        if isinstance(m["content"], list):
            m["content"].append(text("appended"))
            for block in m["content"]:
                if isinstance(block, dict) and "input" in block:
                    block["input"]["command"] = "changed"
    assert adapter.lower(again(b)).messages == AnthropicAdapter().lower(again(b)).messages


def test_an_odd_shape_lowers_as_a_cold_adapter_does() -> None:
    """A tool_use id that is not a string (a buggy client)."""
    adapter = AnthropicAdapter()
    b = body(
        user("go"),
        assistant({"type": "tool_use", "id": ["x"], "name": {"n": 1}, "input": {}}),
        user(result("x")),
    )
    adapter.lower(again(b))
    one, two = adapter.lower(again(b)), adapter.lower(again(b))
    assert one.messages == two.messages == AnthropicAdapter().lower(again(b)).messages


def test_the_bound_holds() -> None:
    kept = KeptLowerings(max_bytes=20_000, max_key_bytes=1_000)
    for i in range(500):
        kept.put(orjson.dumps({"role": "user", "content": f"message {i}"}), i, ("entry", i), 100)
        assert kept.held_bytes <= 10_000
    # two generations, each at most half the bound
    per_entry = len(orjson.dumps({"role": "user", "content": "message 100"})) + 100
    assert len(kept) <= 2 * 10_000 // (per_entry + ENTRY_OVERHEAD_BYTES) + 2
    # the newest are kept, an old one found in the older generation moves to the newer
    assert kept.get((orjson.dumps({"role": "user", "content": "message 499"}), 499)) == (
        "entry",
        499,
    )
    assert kept.get((orjson.dumps({"role": "user", "content": "message 0"}), 0)) is None


def test_a_message_over_the_key_limit_is_never_kept() -> None:
    adapter = AnthropicAdapter()
    adapter.kept.max_key_bytes = 100
    b = body(user("x" * 500), assistant(text("short")))
    adapter.lower(again(b))
    assert len(adapter.kept) == 1  # the assistant's only


async def test_a_warm_request_forwards_the_bytes_a_cold_one_does(engine: Engine) -> None:
    """The same request twice through the engine (the second lowered from the kept entries),
    against a cold adapter on a fresh session: the same forwarded bytes."""
    b = conversation()
    ANTHROPIC.lower(again(b))  # warm
    sent = again(b)
    warm = await engine.rewrite(sent, {}, now=1000.0, session_id="warm", adapter=ANTHROPIC)
    assert sent == b, "the client's body was mutated"
    cold_adapter = AnthropicAdapter()
    cold = await engine.rewrite(again(b), {}, now=1000.0, session_id="cold", adapter=cold_adapter)
    assert orjson.dumps(warm.body) == orjson.dumps(cold.body)
    assert copy.deepcopy(warm.report["tokens"]) == cold.report["tokens"]
