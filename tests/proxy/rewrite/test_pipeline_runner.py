"""The runner: order, per-rule timing, errors contained (skip) or raised (fail), report merging,
and the final integrity check repairing what a buggy rule broke."""

from __future__ import annotations

import operator
from types import SimpleNamespace

import pytest

from proxy.rewrite.pipeline import Pipeline, RuleFailed
from proxy.settings import ConfiguredRule
from proxy.tokens import RequestTokens, TiktokenCounter
from rules.base import Context, RuleConfig, RuleResult, frozen, lists_held
from rules.chain import repair_tool_chain
from rules.chain.validator import find_violations
from rules.messages import append_text, shared_prefix
from rules.report import merge_report
from tests.support.factories import assistant, result, shell, user


def _ctx(*messages):
    msgs = list(messages)
    return Context(
        messages=msgs,
        original_messages=msgs,
        model="gpt-4o",
        tokens=TiktokenCounter("o200k_base"),
        now=0.0,
        session_id="s",
    )


def _raising(ctx, cfg):
    raise ValueError("kaput")


def _appending(ctx, cfg):
    msgs = list(ctx.messages)
    msgs[-1] = append_text(msgs[-1], "tail")
    return RuleResult(msgs, ctx.state.with_value("t", 1), {"repairs": [{"kind": "x"}]})


def _pipeline(mode, *names):
    modules = {"boom": SimpleNamespace(apply=_raising), "tail": SimpleNamespace(apply=_appending)}
    rules = [ConfiguredRule(name=n, config=RuleConfig()) for n in names]
    return Pipeline(rules, mode, modules=modules)


def test_a_rule_that_raises_is_skipped_and_reported() -> None:
    ctx = _ctx(user("hi"))
    out = _pipeline("skip", "boom", "tail").run(ctx)
    assert out.messages[-1]["content"] == "hi\n\ntail"
    assert out.report["rule_errors"] == [{"rule": "boom", "error": "ValueError: kaput"}]
    assert set(out.report["timings_ms"]) >= {"boom", "tail", "integrity_check"}
    assert out.report["repairs"] == [{"kind": "x"}]
    assert out.state.get("t") == 1
    assert ctx.messages[-1]["content"] == "hi"  # the client's messages are untouched


def test_strict_mode_raises() -> None:
    with pytest.raises(RuleFailed, match="boom"):
        _pipeline("fail", "boom").run(_ctx(user("hi")))


def test_a_run_whose_request_went_away_stops_between_rules() -> None:
    """In a worker, a request whose client hung up stops before its next rule (contained by no
    rule's ``except``), and lets go of its messages."""
    from rules import abandon

    calls: list[str] = []
    gone = False

    def first(ctx, cfg):
        nonlocal gone
        calls.append("first")
        gone = True  # the client hangs up while this rule runs
        return None

    def second(ctx, cfg):
        calls.append("second")
        return None

    modules = {"first": SimpleNamespace(apply=first), "second": SimpleNamespace(apply=second)}
    rules = [ConfiguredRule(name=n, config=RuleConfig()) for n in ("first", "second")]
    pipeline = Pipeline(rules, "skip", modules=modules)
    with abandon.watching(lambda: gone), pytest.raises(abandon.Abandoned):
        pipeline.run(_ctx(user("hi")))
    assert calls == ["first"]
    assert lists_held() == 0


def test_tokens_before_and_after_and_prefix_reuse() -> None:
    p = _pipeline("skip", "tail")
    first = p.run(_ctx(user("hello world")))
    assert first.report["tokens"]["after"] > first.report["tokens"]["before"]
    assert first.report["prefix_reuse"] is None  # nothing to compare with yet
    second_ctx = _ctx(user("hello world")).evolve(state=first.state)
    second = p.run(second_ctx)
    assert second.report["prefix_reuse"] == 1.0


def _session_ctx(messages, state=None):
    ctx = _ctx().evolve(
        messages=messages, original_messages=messages, tokens=RequestTokens(_COUNTER)
    )
    return ctx if state is None else ctx.evolve(state=state)


_COUNTER = TiktokenCounter("o200k_base")


def test_prefix_reuse_sizes_the_new_tail_and_keeps_no_list_of_it() -> None:
    """A tool loop's next request: the last one's messages (the same objects) and a call and its
    result. The reuse is the share of the tokens before the tail; the tail is sized message by
    message, so the session's kept running totals (``RequestTokens``' four lists) hold the
    request's own lists, never the tail (a resent body would otherwise push one a request and
    the whole list be counted again)."""
    p = Pipeline([])
    first = [user("fix the failing test"), assistant(None, shell("c1", "pytest -x"))]
    first.append(result("c1", "1 failed: test_parse\n" * 40))
    out = p.run(_session_ctx(first))
    grown = [*first, assistant(None, shell("c2", "cat parse.py")), result("c2", "def parse(): ...")]
    ctx = _session_ctx(grown, out.state)
    again = p.run(ctx)
    tail = _COUNTER.count_messages(grown[3:]) - 3
    total = again.report["tokens"]["after"] - 3
    assert again.report["prefix_shared_messages"] == 3
    assert again.report["prefix_reuse"] == round((total - tail) / total, 4) < 1.0
    out = again
    for _ in range(5):  # the same body resent: the same objects
        out = p.run(_session_ctx(grown, out.state))
        assert out.report["prefix_reuse"] == 1.0
    counted = p.memos_of(ctx).counted  # type: ignore[union-attr]
    # the lists counted are the session's requests (the first, the grown one): never a tail
    assert [len(seen) for seen, _ in counted] == [len(grown), len(first)]
    assert all(all(map(operator.is_, seen, grown)) for seen, _ in counted)


def test_merge_report_appends_lists_and_sets_others() -> None:
    report = {"repairs": [1], "x": 1}
    merge_report(report, {"repairs": [2], "x": 2, "y": [3]})
    assert report == {"repairs": [1, 2], "x": 2, "y": [3]}


def _drops_tool_results(ctx: Context, cfg: object) -> RuleResult:
    """A buggy rule: drops every tool result, leaving calls unanswered."""
    return RuleResult([m for m in ctx.messages if m["role"] != "tool"], ctx.state, {})


def test_final_integrity_check_repairs_a_buggy_rules_output() -> None:
    rules = [
        ConfiguredRule(name="repair_tool_chain", config=repair_tool_chain.Config()),
        ConfiguredRule(name="buggy", config=RuleConfig()),
    ]
    buggy = SimpleNamespace(apply=_drops_tool_results)
    pipeline = Pipeline(rules, "fail", modules={"buggy": buggy})
    broken = [
        user("fix the build"),
        result("gone", "orphan text"),
        assistant(None, shell("c1", "ls")),
        result("c1", "a.py"),
    ]
    out = pipeline.run(_ctx(*broken))
    assert find_violations(out.messages) == []
    kinds = [(r["kind"], r.get("cause")) for r in out.report["repairs"]]
    assert ("orphan_result", None) in kinds  # the rule's own repair, on the client's input
    assert ("integrity_repair", "unanswered_call") in kinds  # the buggy rule's damage
    assert out.report["warnings"][0]["kind"] == "integrity_repair"


def _freezing(ctx, cfg):
    frozen(ctx.messages)  # a rule keeping the list, as prune's and measure's memos do
    shared_prefix(frozen(ctx.original_messages), ctx.messages)
    return None


def test_no_request_list_is_remembered_process_wide_once_its_rules_are_done() -> None:
    """``frozen`` and ``shared_prefix`` remember lists across rules; a request's messages (up to
    the body limit) must not stay alive in them after its pipeline ran."""
    modules = {"freeze": SimpleNamespace(apply=_freezing)}
    pipeline = Pipeline(
        [ConfiguredRule(name="freeze", config=RuleConfig())], "skip", modules=modules
    )
    _freezing(_ctx(user("before")), None)
    assert lists_held() > 0
    pipeline.run(_ctx(user("hi"), assistant("hello"), user("again")))
    assert lists_held() == 0
