"""Each session's per-object memos, kept across its requests (``proxy.rewrite.session_memos``):
a request holding the messages an earlier one of the session held (the same objects) finds them
known without a look-up; whatever a session sends, in whatever objects, the runner gives exactly
what a runner without these memos gives; the memos stay bounded; and the strict engine of the
tests catches a message changed in place after it was memoised."""

from __future__ import annotations

import copy
import random
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from proxy.rewrite.engine import Engine
from proxy.rewrite.pipeline import Pipeline
from proxy.rewrite.records import MessageRecords
from proxy.rewrite.session_memos import (
    ENTRIES_FLOOR,
    ENTRIES_PER_OBJECT,
    ENTRY_BYTES,
    SessionMemos,
)
from proxy.settings import ConfiguredRule, Settings, settings_from_mapping
from proxy.store.sqlite import Store
from proxy.tokens import RequestTokens, TokenCounters
from rules.base import Context, Message, RuleConfig, RuleResult, SessionState
from rules.context import prune
from rules.entities import seen_calls, track_entities
from tests.proxy.rewrite.test_rendered_messages import _agent_run
from tests.support.factories import assistant, result, shell, system, user

COUNTERS = TokenCounters()
RULES = Settings().configured_rules()


def _ctx(
    messages: list[Message],
    state: SessionState,
    now: float,
    session: str = "s",
    model: str = "gpt-4o",
    budget: int | None = 12_000,
) -> Context:
    return Context(
        messages=messages,
        original_messages=messages,
        model=model,
        tokens=RequestTokens(COUNTERS.for_model(model)),
        now=now,
        session_id=session,
        state=state,
        budget=budget,
    )


def _outcome_bytes(outcome: Any) -> bytes:
    report = {k: v for k, v in outcome.report.items() if k != "timings_ms"}
    return orjson.dumps(
        [outcome.messages, report, outcome.state.to_json(), outcome.hashes],
        option=orjson.OPT_SORT_KEYS,
    )


def test_a_session_s_known_messages_are_not_looked_up_again() -> None:
    pipeline = Pipeline(RULES, "fail")
    messages = _agent_run(30)
    first = pipeline.run(_ctx(messages, SessionState(), 1.0))
    pipeline.records = MessageRecords()  # whatever is looked up from now on lands here
    again = pipeline.run(_ctx(list(messages), first.state, 2.0))
    assert len(pipeline.records) == 0  # every message known to the session's memos
    grown = [*messages, {"role": "user", "content": "and the docs"}]
    pipeline.run(_ctx(grown, again.state, 3.0))
    assert len(pipeline.records) == 1  # only the new one
    pipeline.records = MessageRecords()
    pipeline.run(_ctx(copy.deepcopy(grown), again.state, 4.0))  # new objects: looked up
    assert len(pipeline.records) == len(grown)


def _requests(seed: int, steps: int) -> list[tuple[str, list[Message], str]]:
    """A random session: (model, messages, session) per request. Messages grow, are resent as
    the same objects or as new ones, have an earlier one edited, are cut short; the model (so
    the encoding) changes now and then; a second session shares objects with the first."""
    rng = random.Random(seed)
    # text the two encodings count differently, in every message
    run = [
        dict(m, content=f"{m['content']} 删除刚创建的文件夹 🚀")
        if isinstance(m["content"], str)
        else m
        for m in _agent_run(40)
    ]
    out: list[tuple[str, list[Message], str]] = []
    current = run[:10]
    for _ in range(steps):
        move = rng.random()
        if move < 0.35:
            current = current + run[len(current) : len(current) + rng.randint(1, 4)]
        elif move < 0.5:
            current = copy.deepcopy(current)
        elif move < 0.6 and len(current) > 3:
            k = rng.randrange(1, len(current))
            edited = dict(current[k], content=f"edited {rng.random()}")
            current = [*current[:k], edited, *current[k + 1 :]]
        elif move < 0.7 and len(current) > 6:
            current = current[: rng.randrange(3, len(current))]
        model = "claude-3-5-sonnet" if rng.random() < 0.15 else "gpt-4o"
        session = "t" if rng.random() < 0.1 else "s"
        out.append((model, list(current), session))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_any_session_runs_as_a_runner_without_the_memos_runs(seed: int) -> None:
    remembering, forgetting = Pipeline(RULES, "fail"), Pipeline(RULES, "fail")
    forgetting.memos = None
    states: dict[tuple[str, int], SessionState] = {}
    for now, (model, messages, session) in enumerate(_requests(seed, 40)):
        outs = []
        for which, pipeline in enumerate((remembering, forgetting)):
            state = states.get((session, which), SessionState())
            ctx = _ctx(messages, state, float(now), session, model)
            outcome = pipeline.run(ctx)
            states[(session, which)] = outcome.state
            outs.append(_outcome_bytes(outcome))
        assert outs[0] == outs[1]
        memos = remembering.memos_of(_ctx(messages, SessionState(), 0.0, session, model))
        assert memos is not None and memos.changed() == []


def test_a_session_s_memos_are_dropped_when_far_larger_than_its_requests() -> None:
    memos = SessionMemos()
    mine = memos.take("s", "o200k_base")
    mine.hashes.update({k: ({"k": k}, "h") for k in range(ENTRIES_FLOOR)})
    memos.settle("s", "o200k_base", mine, objects=10)
    assert memos.peek("s", "o200k_base") is mine
    assert memos.held_bytes == ENTRY_BYTES * ENTRIES_FLOOR
    mine.hashes.update({-k: ({"k": k}, "h") for k in range(1, ENTRIES_PER_OBJECT * 10 + 2)})
    memos.settle("s", "o200k_base", mine, objects=10)
    assert memos.peek("s", "o200k_base") is None and memos.held_bytes == 0
    assert memos.take("s", "o200k_base") is not mine  # made afresh


def test_the_least_recently_used_sessions_go_past_the_bound() -> None:
    memos = SessionMemos(max_bytes=1_000 * ENTRY_BYTES)
    for name in ("a", "b", "c"):
        taken = memos.take(name, None)
        taken.hashes.update({k: ({"k": k}, "h") for k in range(400)})
        memos.settle(name, None, taken, objects=400)
    assert memos.peek("a", None) is None  # the oldest went
    assert memos.peek("b", None) is not None and memos.peek("c", None) is not None
    assert memos.held_bytes == 800 * ENTRY_BYTES
    memos.take("b", None)  # used again: the newest now
    memos.settle("c", None, memos.take("c", None), objects=400)
    taken = memos.take("d", None)
    taken.hashes.update({k: ({"k": k}, "h") for k in range(400)})
    memos.settle("d", None, taken, objects=400)
    assert memos.peek("b", None) is None and len(memos) == 2


def test_a_tenants_flood_evicts_its_own_sessions_first() -> None:
    """Over the bound, the principal charged most loses its least recently used sessions first:
    one tenant's large one-off bodies no longer push another's session back to cold rules."""
    memos = SessionMemos(max_bytes=2_000 * ENTRY_BYTES)
    bob = memos.take("bob/work", None)
    bob.hashes.update({k: ({"k": k}, "h") for k in range(300)})
    memos.settle("bob/work", None, bob, objects=300)
    for i in range(6):  # alice's sessions, each newer than bob's
        name = f"alice/s{i}"
        taken = memos.take(name, None)
        taken.hashes.update({k: ({"k": k}, "h") for k in range(600)})
        memos.settle(name, None, taken, objects=600)
        assert memos.held_bytes <= 2_000 * ENTRY_BYTES
    assert memos.peek("bob/work", None) is bob  # the oldest, but its principal holds least
    assert memos.peek("alice/s5", None) is not None and memos.peek("alice/s0", None) is None
    for i in range(6):
        memos.forget(f"alice/s{i}")
    memos.forget("bob/work")
    assert memos.held_bytes == 0 and len(memos) == 0


def test_the_messages_taken_in_are_charged_by_their_bytes() -> None:
    """Large tool results: the memos may keep their objects after the byte-bounded stores let
    them go, so each message taken in is charged for its JSON, not just its entries."""
    pipeline = Pipeline([], "fail")
    bound = 600_000
    pipeline.memos = SessionMemos(max_bytes=bound)
    for s in range(20):
        messages = [{"role": "user", "content": f"task {s}"}]
        messages += [{"role": "user", "content": f"{s} {k} " + "word " * 4_400} for k in range(6)]
        pipeline.run(_ctx(messages, SessionState(), 1.0, session=f"s{s}"))
        assert pipeline.memos.held_bytes <= bound
    assert 1 <= len(pipeline.memos) <= 3  # each session is charged ~6 × 3 × 22 KB and more


def test_the_keys_of_calls_read_kept_as_a_set_are_charged() -> None:
    """A session whose state holds thousands of keys of calls read (they outlive the agent's
    own truncation of its history) keeps a set of them after one small request: the memos are
    charged for it, though its request holds four messages."""
    pipeline = Pipeline(RULES, "fail")
    seen = [f"call_{k:024d}:abcdef012345" for k in range(5_000)]
    state = SessionState({track_entities.META: {"cwd": None, "seq": 0, "seen": seen}})
    call = {"id": "new", "type": "function",
            "function": {"name": "bash", "arguments": '{"command": "ls"}'}}  # fmt: skip
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "new", "content": "a.txt"},
    ]
    pipeline.run(_ctx(messages, state, 1.0))
    held = pipeline.memos.peek("s", "o200k_base")
    assert held is not None
    kept = held.derived[seen_calls.MEMO][0][1][1]
    assert len(kept) == 5_000  # the cap: the oldest key made room for the new call
    assert pipeline.memos.held_bytes >= sys.getsizeof(kept) + sum(map(sys.getsizeof, seen))
    assert len(pipeline.memos) == 1  # charged, not counted as entries: the memos stay


def test_concurrent_requests_of_one_session_agree() -> None:
    pipeline = Pipeline(RULES, "fail")
    messages = _agent_run(40)
    want = _outcome_bytes(Pipeline(RULES, "fail").run(_ctx(messages, SessionState(), 1.0)))
    got: list[bytes] = []

    def run() -> None:
        for _ in range(5):
            got.append(_outcome_bytes(pipeline.run(_ctx(messages, SessionState(), 1.0))))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [want] * 20


def _edits_in_place(ctx: Context, cfg: object) -> RuleResult:
    """A buggy rule: changes the last message it was given in place."""
    ctx.messages[-1]["content"] = "changed in place"
    return RuleResult.unchanged(ctx)


async def test_the_strict_engine_catches_a_message_changed_in_place(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "db"))
    await store.open()
    engine = Engine(settings_from_mapping({}), store, strict=True)
    rules = [*RULES, ConfiguredRule(name="buggy", config=RuleConfig())]
    engine.pipeline = Pipeline(
        rules, "fail", modules={"buggy": SimpleNamespace(apply=_edits_in_place)}
    )
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    try:
        with pytest.raises(AssertionError, match="changed in place"):
            await engine.rewrite(body, {}, now=1.0, session_id="s")
    finally:
        engine.close()
        await store.close()


def test_a_list_counted_before_is_counted_again_only_when_it_differs() -> None:
    tokens = RequestTokens(COUNTERS.for_model("gpt-4o"))
    messages = _agent_run(5)
    total = tokens.count_messages(messages)
    assert total == COUNTERS.for_model("gpt-4o").count_messages(messages)
    assert tokens.count_messages(list(messages)) == total  # the same objects
    longer = [*messages[:-1], {**messages[-1], "content": messages[-1]["content"] * 3}]
    assert tokens.count_messages(longer) > total  # another last message: counted
    grown = list(messages)
    tokens.count_messages(grown)
    grown.append({"role": "user", "content": "more"})  # changed after it was counted
    assert tokens.count_messages(grown) == COUNTERS.for_model("gpt-4o").count_messages(grown)
    assert tokens.count_messages([]) == 3


def test_the_system_prompt_is_the_same_object_while_it_says_the_same() -> None:
    from proxy.protocols.anthropic import AnthropicAdapter
    from proxy.protocols.responses import ResponsesAdapter

    say = [{"role": "user", "content": "hi"}]
    for adapter, key, body in (
        (AnthropicAdapter(), "system", {"model": "m", "system": "Be brief.", "messages": say}),
        (
            ResponsesAdapter(),
            "instructions",
            {"model": "m", "instructions": "Be brief.", "input": say},
        ),
    ):
        first = adapter.lower(orjson.loads(orjson.dumps(body)), "s").messages[0]
        again = adapter.lower(orjson.loads(orjson.dumps(body)), "s").messages[0]
        assert again is first and first["content"] == "Be brief."
        changed = adapter.lower({**body, key: "Be thorough."}, "s").messages[0]
        assert changed is not first and changed["content"] == "Be thorough."
        assert first["content"] == "Be brief."  # the kept one was not changed


async def test_the_sampled_check_drops_a_session_s_memos_changed_in_place(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``memory.integrity_sample: 1`` (production, not strict): a memoised message changed in
    place between requests (as a buggy component sharing the parsed objects would) is found by
    the next request, the session's memos are dropped, the counter goes up, one warning is
    logged, and the request after it forwards what an engine without memos forwards."""
    from proxy.telemetry.metrics import Metrics

    settings = settings_from_mapping({"memory": {"integrity_sample": 1}})
    store, ref_store = Store(str(tmp_path / "db")), Store(str(tmp_path / "ref"))
    await store.open()
    await ref_store.open()
    engine, ref = Engine(settings, store), Engine(settings, ref_store)
    ref.pipeline.memos, ref.pipeline.renders = None, None  # nothing kept: nothing to lie
    metrics = Metrics(engine=engine)
    msgs: list[Message] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]

    async def both(messages: list[Message], now: float) -> tuple[bytes, bytes]:
        body = {"model": "gpt-4o", "messages": messages}
        got = await engine.rewrite(body, {}, now=now, session_id="s")
        want = await ref.rewrite(copy.deepcopy(body), {}, now=now, session_id="s")
        return orjson.dumps(got.body), orjson.dumps(want.body)

    try:
        with caplog.at_level("WARNING", logger="ctxproxy.engine"):
            got, want = await both(msgs, 1.0)
            assert got == want and engine.integrity.failures == 0
            assert engine.pipeline.memos is not None and len(engine.pipeline.memos) == 1
            msgs[1]["content"] = "changed in place"  # a memoised object, changed
            msgs += [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "?"}]
            await both(msgs, 2.0)
            assert engine.integrity.failures == 1
            assert len(engine.pipeline.memos) == 0  # the session's memos dropped
            assert b"ctxproxy_memo_integrity_failures_total 1.0" in metrics.exposition()
            msgs += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "!"}]
            got, want = await both(msgs, 3.0)
            assert got == want and engine.integrity.failures == 1
            msgs[0]["content"] = "changed again"  # a second failure: counted, not logged again
            await both([*msgs, {"role": "assistant", "content": "x"}], 4.0)
            assert engine.integrity.failures == 2
        warned = [r for r in caplog.records if "changed in place" in r.getMessage()]
        assert len(warned) == 1
    finally:
        engine.close()
        ref.close()
        await store.close()
        await ref_store.close()


async def test_the_sampled_check_runs_one_request_in_n(tmp_path: Path) -> None:
    settings = settings_from_mapping({"memory": {"integrity_sample": 3}})
    store = Store(str(tmp_path / "db"))
    await store.open()
    engine = Engine(settings, store)
    calls = []
    real = engine.pipeline.memos_of
    engine.pipeline.memos_of = lambda ctx: calls.append(1) or real(ctx)  # type: ignore[method-assign]
    try:
        for i in range(7):
            body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"hi {i}"}]}
            await engine.rewrite(body, {}, now=float(i), session_id=f"s{i}")
        assert len(calls) == 2  # requests 3 and 6
    finally:
        engine.close()
        await store.close()


def test_a_view_sent_back_as_the_client_s_list_runs_as_without_the_memos() -> None:
    """The overflow rescue retries the forwarded body, under a lower budget at the same clock:
    chat's messages are then the very list the pipeline forwarded, for which prune told inject
    its view's anchors (inject left out here: it forwards prune's view itself, as inject does
    whenever it places nothing). The retry runs as a runner without the memos runs (the list's
    own anchors), not on what the first request told."""
    messages: list[Message] = [system(), user("fix the failing test in src/app.py")]
    for n in range(14):
        call = shell(f"c{n}", f"cat src/f{n}.py")
        # names no later result shows (likely copied from): a drop frees more per chance lost
        text = "\n".join(f"value_{n}_{i} = " + "x" * 40 for i in range(30))
        messages += [assistant(f"step {n}", call), result(call["id"], text)]
    small = prune.Config(max_result_tokens=300, keep_last_observations=2)
    rules = [r if r.name != "prune" else ConfiguredRule(name="prune", config=small) for r in RULES]
    rules = [r for r in rules if r.name != "inject"]
    remembering, forgetting = Pipeline(rules, "fail"), Pipeline(rules, "fail")
    forgetting.memos = None
    first = remembering.run(_ctx(messages, SessionState(), 1_000.0, budget=3_000))
    assert first.report["prune"]["dropped"]  # a dropped run's line: its anchor is told
    outs = []
    for pipeline in (remembering, forgetting):
        retry = _ctx(first.messages, first.state, 1_000.0, budget=2_000)
        outs.append(_outcome_bytes(pipeline.run(retry)))
    assert outs[0] == outs[1]
