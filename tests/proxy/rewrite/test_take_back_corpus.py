"""A refused request leaves no trace in what its session forwards next: on a corpus
conversation under a budget that compacts, in each of the four protocols, a request refused
(its state put back by ``Engine.take_back``), then its retry and the request after it, forward
exactly the bytes, and leave exactly the state, of a replay where it was never sent."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from bench.invariants_replay import Replayer
from tests.support.traces import iter_conversations, request_prefixes
from tests.test_protocol_invariants import TRACES

pytestmark = pytest.mark.needs_shared

BUDGET = {"pipeline": {"budget_tokens": 2000, "on_rule_error": "fail"}}
TRACE = "bookminder/day-013/s1"  # 6 requests; the 4th compacts (drops turns) at this budget
COMPACTING = 3


async def _replay(protocol: str, prefixes: list[Any], refuse: int | None) -> list[bytes]:
    rp = Replayer(BUDGET, "instructions")
    await rp.open()
    engine, store = rp.engines[protocol]
    model = "gpt-4o" if protocol == "gemini" else None
    out = []
    try:
        for i, prefix in enumerate(prefixes):
            body, adapter = rp.body(protocol, prefix)
            sent = orjson.dumps(body)
            now = 1_000_000.0 + 7 * i
            kw: dict[str, Any] = {"now": now, "session_id": "s", "adapter": adapter}
            if i == refuse:
                refused = await engine.rewrite(body, {}, model=model, **kw)
                assert await engine.take_back(refused)
            done = await engine.rewrite(body, {}, model=model, **kw)
            assert orjson.dumps(body) == sent  # the client's body untouched
            state, _ = await store.load_state("s")
            out.append(orjson.dumps([done.body, state.data], option=orjson.OPT_SORT_KEYS))
    finally:
        await rp.close()
    return out


@pytest.mark.parametrize("protocol", ["chat", "anthropic", "responses", "gemini"])
def test_the_next_requests_after_a_refusal_are_as_if_it_was_never_sent(protocol: str) -> None:
    assert TRACE in TRACES
    conv = next(c for c in iter_conversations() if c["id"] == TRACE)
    prefixes = list(request_prefixes(conv["messages"]))
    plain = asyncio.run(_replay(protocol, prefixes, None))
    assert b"[ctxproxy: dropped" in plain[COMPACTING]  # the refused request compacts
    for refuse in (COMPACTING, len(prefixes) - 1):
        assert asyncio.run(_replay(protocol, prefixes, refuse)) == plain, refuse
