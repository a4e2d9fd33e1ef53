"""The runner's memo of rendered messages (``RenderedMessages``, ``Context.renders``): an edit the
overlay replays unchanged is looked up instead of rendered again. It stays bounded in bytes, hands
out the very object it kept (the same message in every request, so the session's per-object memos
know it), keeps only JSON within its entry bound, and a replay through it forwards the very bytes
a replay without it does."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.rewrite.pipeline import Pipeline
from proxy.rewrite.recall import Recall
from proxy.rewrite.records import OBJECT_FACTOR, RENDER_OVERHEAD_BYTES, RenderedMessages
from proxy.settings import Settings
from proxy.tokens import RequestTokens, TokenCounters
from rules.base import Context, Message, SessionState
from tests.support.factories import assistant, call, result, user


def test_bounded_in_bytes() -> None:
    store = RenderedMessages(max_bytes=20_000)
    message = {"role": "tool", "tool_call_id": "c", "content": "x" * 200}
    cost = OBJECT_FACTOR * len(orjson.dumps(message)) + RENDER_OVERHEAD_BYTES
    for k in range(1_000):
        store.put(("elide", k), message)
        assert store.held_bytes <= 10_000  # one generation: half the bound
    assert len(store) <= 2 * (10_000 // cost)
    assert store.get(("elide", 0)) is None  # the oldest went
    assert store.get(("elide", 999)) == (message, {})


def test_a_hit_is_the_object_kept() -> None:
    store = RenderedMessages()
    shrunk: Message = {
        "role": "assistant",
        "content": "first line\n[ctxproxy: clipped 120 more characters of this message]",
        "tool_calls": [call("c1", "Write", file_path="a.py", content="x [ctxproxy: 9]")],
    }
    elided: Message = {"role": "tool", "tool_call_id": "c1", "content": "[ctxproxy: elided …]"}
    for key, message in ((("shrink",), shrunk), (("elide",), elided)):
        record = store.put(key, message)
        assert record == {}
        assert store.get(key) == (message, record)
        hit = store.get(key)
        assert hit is not None and hit[0] is message and hit[1] is record


def test_keeps_only_json_within_its_entry_bound() -> None:
    store = RenderedMessages(max_entry_bytes=1_000)
    assert store.put(("big",), {"role": "tool", "content": "x" * 2_000}) is None
    assert store.put(("key",), {"role": "tool", 1: "not JSON"}) is None
    assert store.put(("surrogate",), {"role": "tool", "content": "\ud800"}) is None
    assert len(store) == 0


def _agent_run(steps: int) -> list[Message]:
    """An agent run prune has to compact: long reads and re-reads, long prose, long writes."""
    out = [user("Refactor the parser and keep the tests green")]
    for k in range(steps):
        path = f"f{k % 5}.py" if k % 3 == 0 else f"g{k}.py"
        body = "\n".join(f"{path} {k} line {i} " + "tok " * 8 for i in range(60))
        prose = "\n".join(f"thinking about step {k}, point {i}" for i in range(8))
        if k % 4 == 3:
            write = call(f"c{k}", "Write", file_path=path, content="def f():\n" + "  x = 1\n" * 90)
            out += [assistant(prose, write), result(f"c{k}", f"wrote {path}")]
        else:
            out += [assistant(prose, call(f"c{k}", "Read", file_path=path)), result(f"c{k}", body)]
    return out


def _replay(pipeline: Pipeline, messages: list[Message], budget: int) -> list[bytes]:
    counter = TokenCounters().for_model("gpt-4o")
    state, sent = SessionState(), []
    for end in range(3, len(messages) + 1, 2):
        prefix = [dict(m) for m in messages[:end]]  # new objects every request, as parsed
        ctx = Context(
            messages=prefix,
            original_messages=prefix,
            model="gpt-4o",
            tokens=RequestTokens(counter),
            now=float(end),
            session_id="s",
            state=state,
            budget=budget,
        )
        outcome = pipeline.run(ctx)
        state = outcome.state
        report = {k: v for k, v in outcome.report.items() if k != "timings_ms"}
        sent.append(orjson.dumps([outcome.messages, report], option=orjson.OPT_SORT_KEYS))
    return sent


def test_a_replay_through_the_memo_forwards_the_same_bytes(monkeypatch: Any) -> None:
    hits = []
    know = Recall.know
    monkeypatch.setattr(Recall, "know", lambda self, m, r: (hits.append(1), know(self, m, r)))
    messages = _agent_run(60)
    rules = Settings().configured_rules()
    remembering, forgetting = Pipeline(rules, "fail"), Pipeline(rules, "fail")
    forgetting.renders = None  # every edit rendered from scratch
    budget = 12_000
    assert _replay(remembering, messages, budget) == _replay(forgetting, messages, budget)
    assert len(hits) > 100  # edits were replayed through it
