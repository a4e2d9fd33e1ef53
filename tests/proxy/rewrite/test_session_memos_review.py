"""The session memos (``proxy.rewrite.session_memos``): what a session's memos hand a later
request must be what that request would compute without them, and they must stay bounded in what
they keep alive. Two cases once went wrong and are guarded here: prune's shared anchors must not
reach a later request holding the same view objects, and the bound must count bytes, not only
entries."""

from __future__ import annotations

import contextlib
import copy
import random
import threading
from types import SimpleNamespace

import orjson
import pytest

from proxy.rewrite.pipeline import Pipeline
from proxy.rewrite.session_memos import ObjectMemos, SessionMemos
from proxy.tokens import RequestTokens, TokenCounters
from rules.base import Context, Message, SessionState
from rules.context import inject, prune, replay

COUNTERS = TokenCounters()


def _ctx(messages: list[Message], session: str = "s", state: SessionState | None = None) -> Context:
    return Context(
        messages=messages,
        original_messages=messages,
        model="gpt-4o",
        tokens=RequestTokens(COUNTERS.for_model("gpt-4o")),
        now=1.0,
        session_id=session,
        state=state or SessionState(),
        budget=None,
    )


def _call(cid: str, command: str) -> Message:
    args = orjson.dumps({"command": command}).decode()
    call = {"id": cid, "type": "function", "function": {"name": "bash", "arguments": args}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _session_with_a_large_result() -> list[Message]:
    big = "\n".join(f"line {k}: {'x' * 40}" for k in range(600))
    return [
        {"role": "user", "content": "Look at the parser"},
        _call("c1", "python dump_parser.py"),
        {"role": "tool", "tool_call_id": "c1", "content": big},
        {"role": "user", "content": "now fix it"},
    ]


def test_a_view_s_shared_anchors_never_reach_a_later_request() -> None:
    """``Context.derived`` is kept per session and matches any list of the very same objects,
    so a value is only right when it is a pure function of the list's messages. prune's
    ``share_anchors`` breaks that: it records, for its view, the anchors of the *source*
    messages (an edited message keeps its source's anchor), not ``anchors_in(view)``. A later
    request whose list holds the same view objects (the same input objects and the renderings
    ``RenderedMessages`` hands back) but where prune did not share (``share_anchors`` returns
    early when a compaction was tried and not kept) gets the earlier request's source anchors in
    inject, where a runner without the memos computes the view's own anchors: inject's blocks
    are then placed (or lost) by other anchors, and the forwarded bytes differ."""
    messages = _session_with_a_large_result()
    cfg = prune.Config(max_result_tokens=200)
    memos = ObjectMemos()
    first = prune.apply(memos.attach(_ctx(messages)), cfg)
    view = first.messages
    assert view is not messages and view[2] is not messages[2]  # the large result capped
    # a later request of the session: the same view objects, prune not sharing this time
    later = memos.attach(_ctx(list(view)))
    without_memos = _ctx(list(view))
    assert inject._anchors(without_memos, without_memos.messages) == replay.anchors_in(
        without_memos, list(view)
    )
    assert inject._anchors(later, later.messages) == inject._anchors(
        without_memos, without_memos.messages
    )


def _retained_bytes(memos: SessionMemos) -> int:
    seen: dict[int, Message] = {}
    for session in list(memos._memos.values()):
        for m, _ in session.hashes.values():
            seen[id(m)] = m
    return sum(len(orjson.dumps(m)) for m in seen.values())


def test_the_memos_bound_holds_for_the_bytes_they_keep_alive() -> None:
    """Each entry keeps its message alive, after the byte-bounded stores (kept lowerings, body
    memory, ``RenderedMessages``) may have let it go: the bound is on bytes, messages charged
    for their JSON, so sessions of large tool results keep about what the bound says."""
    pipeline = Pipeline([], "fail")
    bound = 2_000_000
    pipeline.memos = SessionMemos(max_bytes=bound)
    rng = random.Random(7)
    for s in range(20):
        messages: list[Message] = [{"role": "user", "content": f"task {s}"}]
        for k in range(6):
            text = " ".join(f"{rng.random():.6f}" for _ in range(2_500))  # ~22 KB, distinct
            messages.append({"role": "user", "content": f"{k} {text}"})
        pipeline.run(_ctx(messages, session=f"s{s}"))
    assert pipeline.memos.held_bytes <= bound
    assert _retained_bytes(pipeline.memos) <= bound // 2  # JSON, charged 3× as objects


def test_derived_keeps_the_messages_a_list_had_so_a_list_changed_later_is_not_matched() -> None:
    """``Context.derived`` keeps the messages of the list it derived from (a tuple), so a caller
    changing that list in place afterwards cannot hand another list the stale value."""
    memos = ObjectMemos()
    messages = _session_with_a_large_result()
    ctx = memos.attach(_ctx(messages))
    assert ctx.derived("n", len) == 4
    messages.append({"role": "user", "content": "more"})  # changed after it was derived
    again = memos.attach(_ctx(list(messages)))
    assert again.derived("n", len) == 5


def test_two_sessions_share_renderings_and_both_run_as_without_memos() -> None:
    """Renderings (``RenderedMessages``) are handed to every session as the same objects, and
    each session's memos hold values for them: a second session resending the first's messages
    (new objects) and the first again (same objects) both match a memo-less runner."""
    from proxy.settings import Settings
    from tests.proxy.rewrite.test_rendered_messages import _agent_run

    rules = Settings().configured_rules()
    remembering, forgetting = Pipeline(rules, "fail"), Pipeline(rules, "fail")
    forgetting.memos = None
    run = _agent_run(30)
    plan = [("a", run), ("b", copy.deepcopy(run)), ("a", list(run)), ("b", run), ("a", run)]
    states: dict[tuple[str, int], SessionState] = {}
    for now, (session, messages) in enumerate(plan):
        outs = []
        for which, pipeline in enumerate((remembering, forgetting)):
            ctx = Context(
                messages=messages,
                original_messages=messages,
                model="gpt-4o",
                tokens=RequestTokens(COUNTERS.for_model("gpt-4o")),
                now=float(now),
                session_id=session,
                state=states.get((session, which), SessionState()),
                budget=12_000,
            )
            outcome = pipeline.run(ctx)
            states[(session, which)] = outcome.state
            outs.append(orjson.dumps([outcome.messages, outcome.hashes]))
        assert outs[0] == outs[1]


def test_a_worker_thread_and_the_loop_on_one_session_agree() -> None:
    """Pinned: two requests of one session at once (the offload worker and the event loop)
    share one ``ObjectMemos`` (its dicts and its counted lists changed by both): each gets what
    a memo-less runner gives."""
    from proxy.settings import Settings
    from tests.proxy.rewrite.test_rendered_messages import _agent_run

    rules = Settings().configured_rules()
    pipeline = Pipeline(rules, "fail")
    runs = [_agent_run(20), _agent_run(35)]
    forgetting = Pipeline(rules, "fail")
    forgetting.memos = None
    want = [orjson.dumps(forgetting.run(_ctx(list(r))).messages) for r in runs]
    got: list[tuple[int, bytes]] = []
    lock = threading.Lock()

    def go(which: int) -> None:
        for _ in range(4):
            out = orjson.dumps(pipeline.run(_ctx(list(runs[which]))).messages)
            with lock:
                got.append((which, out))

    threads = [threading.Thread(target=go, args=(k % 2,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(out == want[which] for which, out in got) and len(got) == 16


def _stopped(ctx: Context, cfg: object) -> None:
    raise RuntimeError("kaput")


@pytest.mark.parametrize("ending", ["abandoned", "failed"])
def test_a_run_that_never_ends_still_charges_what_its_memos_took_in(ending: str) -> None:
    """A request's run memoises its messages (their hashes, counts) before its first rule; one
    stopped there (its client gone, ``rules.abandon``; a rule failing with ``on_rule_error:
    fail``) left its session's memos holding them uncharged, so nothing ever let them go: a
    tenant hanging up on heavy requests under new session names grew the memory every tenant
    shares past the bound, one body's messages at a time."""
    from proxy.settings import ConfiguredRule
    from rules import abandon
    from rules.base import RuleConfig

    rule = ConfiguredRule(name="stop", config=RuleConfig())
    pipeline = Pipeline([rule], "fail", modules={"stop": SimpleNamespace(apply=_stopped)})
    bound = 2_000_000
    pipeline.memos = SessionMemos(max_bytes=bound)
    rng = random.Random(7)
    for s in range(20):
        messages: list[Message] = [{"role": "user", "content": f"task {s}"}]
        for k in range(6):
            text = " ".join(f"{rng.random():.6f}" for _ in range(2_500))  # ~22 KB, distinct
            messages.append({"role": "user", "content": f"{k} {text}"})
        with contextlib.ExitStack() as stack:
            if ending == "abandoned":
                stack.enter_context(abandon.watching(lambda: True))
            with pytest.raises((abandon.Abandoned, RuntimeError)):
                pipeline.run(_ctx(messages, session=f"gone-{s}"))
    assert pipeline.memos.held_bytes <= bound
    assert _retained_bytes(pipeline.memos) <= bound // 2  # JSON, charged 3× as objects
