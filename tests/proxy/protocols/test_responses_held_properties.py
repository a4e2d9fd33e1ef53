"""Outputs of calls the provider holds, over generated Responses inputs: calls, outputs (ids
shared, repeated, missing or not strings), item references, messages and reasoning, with and
without a stored conversation to continue. Through the real engine in strict mode, whatever the
input: no rule fails, the body forwarded passes the protocol's final check, nothing is flattened
to text, and the first output of each call the provider holds is forwarded as sent."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.protocols.checks import responses_violations
from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine
from proxy.settings import settings_from_mapping
from proxy.store.sqlite import Store
from rules.messages import HELD

IDS = st.sampled_from(["c1", "c2", "c3", "held_a", "held_b"])


def _call(cid: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": cid, "name": "exec_command",
            "arguments": orjson.dumps({"cmd": f"ls {cid}"}).decode()}  # fmt: skip


def _output(cid: Any) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": f"out of {cid}"}


ITEM = st.one_of(
    IDS.map(_call),
    st.one_of(IDS, st.none(), st.just(["c1"]), st.integers(0, 3)).map(_output),
    st.just({"type": "item_reference", "id": "fc_stored"}),
    st.text(min_size=1, max_size=20).map(
        lambda t: {"type": "message", "role": "user", "content": t}
    ),
    st.just({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}),
)
HISTORY = st.sampled_from([{}, {"conversation": "conv_1"}, {"previous_response_id": "resp_1"}])


def held_outputs(items: list[Any], stored: bool) -> list[int]:
    """The outputs the provider's history answers: a string id no earlier call has, in a body
    continuing stored history or after an item_reference, the first with its id."""
    calls: set[str] = set()
    seen: set[str] = set()
    referenced = False
    out = []
    for i, item in enumerate(items):
        kind = item["type"]
        if kind == "item_reference":
            referenced = True
        elif kind == "function_call":
            calls.add(item["call_id"])
        elif kind == "function_call_output":
            cid = item["call_id"]
            if isinstance(cid, str) and cid not in calls and (stored or referenced):
                if cid not in seen:
                    out.append(i)
                seen.add(cid)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(items=st.lists(ITEM, min_size=1, max_size=12), history=HISTORY)
async def test_generated_inputs(tmp_path: Path, items: list[Any], history: dict[str, Any]) -> None:
    store = Store(str(tmp_path / "db"))
    await store.open()
    engine = Engine(settings_from_mapping({"upstreams": [{"name": "o"}]}), store, strict=True)
    try:
        body = {"model": "gpt-5", "input": items, **history}
        sent = copy.deepcopy(body)
        out = await engine.rewrite(body, {"session-id": "s"}, now=1000.0, adapter=RESPONSES)
    finally:
        engine.close()
        await store.close()
    assert body == sent
    forwarded = out.body
    assert HELD.encode() not in orjson.dumps(forwarded)
    assert responses_violations(forwarded) == []
    assert "fallback_flatten" not in [r["kind"] for r in out.report["repairs"]]
    kept = forwarded["input"] if isinstance(forwarded["input"], list) else []
    for i in held_outputs(items, bool(history)):
        assert any(item == items[i] for item in kept), items[i]


async def test_a_reference_is_found_among_the_items_as_mended(tmp_path: Path) -> None:
    """A reasoning item cut from its call goes before lowering: the reference after it still
    comes before the output that follows it (found by the generated inputs above)."""
    items = [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
        _output("c1"),
        {"type": "item_reference", "id": "fc_stored"},
        _output("c1"),
    ]
    store = Store(str(tmp_path / "db"))
    await store.open()
    engine = Engine(settings_from_mapping({"upstreams": [{"name": "o"}]}), store, strict=True)
    try:
        out = await engine.rewrite(
            {"model": "gpt-5", "input": items}, {"session-id": "s"}, now=1000.0, adapter=RESPONSES
        )
    finally:
        engine.close()
        await store.close()
    assert out.body["input"][-1] == items[3]
