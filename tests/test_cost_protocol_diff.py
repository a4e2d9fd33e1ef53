"""bench/cost_protocol_diff.py on one corpus conversation replayed as chat and as Gemini: the
compaction falls on the same request in both, frees about the same tokens in the rules' view,
and saves more on the chat wire (a call's arguments are a JSON string there, an object in
Gemini's ``args``: the arguments weigh more on that wire, ``call_weight``); the costs it sums
are those of ``bench.cost``'s own replay."""

from __future__ import annotations

import pytest

from bench.cache_emulator import CacheUse
from bench.cost_config import PRICES, Job
from bench.cost_protocol_diff import METHODS, _call_arguments, call_weight, replay_pair
from bench.cost_rewrite import convert
from bench.replay import replay_job
from tests.support.traces import iter_conversations

pytestmark = pytest.mark.needs_shared

CONVERSATION = "mswea-pr816/deepseek_chat_test_1-100/django__django-15388"
# compacts on the same request on both wires at r = 0.25 (docs/performance.md's example)
SAME_CUT = "mswea-pr816/deepseek_chat_test_1-100/django__django-12700"


def test_the_same_compaction_saves_more_on_the_chat_wire() -> None:
    conv = next(c for c in iter_conversations() if c["id"] == SAME_CUT)
    price = PRICES["0.25"]
    _, traces = replay_pair((conv, "gemini", 40, (price,)))
    chat, gemini = traces["chat"], traces["gemini"]
    assert chat.compacted[price.name] == gemini.compacted[price.name] != []
    assert abs(chat.view_saved[price.name] - gemini.view_saved[price.name]) < 100
    assert chat.wire_saved[price.name] > gemini.wire_saved[price.name] > 0
    # the costs are bench.cost's: the same replay's sums for the same lanes
    job = Job(conv, METHODS, (price,), 0, False, "gemini", "every-turn", 60.0, 40)
    stats = replay_job(job).stats
    costs = {key: price.cost(CacheUse(s.prompt, s.cached, s.written)) for key, s in stats.items()}
    method, direct = gemini.cost[price.name]
    assert (method, direct) == (costs["defaults", price.name], costs["direct", ""])


def test_call_arguments_weigh_more_on_the_chat_wire() -> None:
    conv = next(c for c in iter_conversations() if c["id"] == CONVERSATION)
    calls = sum(len(m.get("tool_calls") or []) for m in conv["messages"])
    for protocol in ("anthropic", "responses", "gemini"):
        body = convert(protocol, "gemini-2.5-flash", conv["messages"])
        assert len(list(_call_arguments(body))) == calls, protocol
    view, chat, wire = call_weight([conv], "gemini")
    assert view > 1000
    assert chat > 1.05 * wire  # a JSON string inside the JSON: quotes and newlines escaped twice
    assert abs(wire - view) < 0.01 * view  # Gemini's args object is the view's JSON
    _, _, responses = call_weight([conv], "responses")
    assert responses == chat  # a JSON string there too
