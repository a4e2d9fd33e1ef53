"""A way back for what earlier compactions elided (``rules/context/restore.py``): a compaction the
budget forces re-judges the results they masked or dropped that the agent's last calls point at
again; one that now ranks above something still shown comes back verbatim and the cut takes the
other. Never on a request that makes no such compaction: the overlay is replayed as it was."""

from __future__ import annotations

from typing import Any

from rules.base import CacheFacts, Message, SessionState
from rules.context import overlay, prune, restore
from rules.context.prune_plan import Run
from rules.messages import role, text_of, tool_calls
from tests.support.factories import TOKENS, assistant, call, ctx, result, shell, user

NOW = 10_000.0
ENGINE_AFTER = 2  # the runs before the read: the new compaction's rewrite starts among them


def _engine() -> str:
    """A large read of a file (the kind the agent copies ``old_str`` lines from)."""
    lines = (f"def engine_step_{i}(state):\n    return state.advance({i})" for i in range(80))
    return "\n".join(lines)


def _session(named_again: bool) -> list[Message]:
    """A task, a dozen shell runs with a read of src/engine.py after the first two, and a last
    call that names the engine's file again (or another file)."""
    msgs: list[Message] = [user("Make the engine resumable")]
    for k in range(12):
        if k == ENGINE_AFTER:
            read = call("e", "Read", file_path="src/engine.py")
            msgs += [assistant(None, read), result("e", _engine())]
        out = "\n".join(f"log_{k}_{i}: step finished in {i * 3} ms" for i in range(60))
        msgs += [assistant(None, shell(f"s{k}", f"./bench --case {k}")), result(f"s{k}", out)]
    look = "grep -n step src/engine.py" if named_again else "grep -n resume src/other.py"
    msgs += [assistant(None, shell("g", look)), result("g", "7: x")]
    return msgs


def _dropped_engine(msgs: list[Message], mask: str | None = None) -> dict[str, Any]:
    """A stored overlay from an earlier compaction: the engine read's turn dropped (and the
    result of ``mask``'s call masked)."""
    run = Run(ctx(msgs), prune.Config(), prune.NAMESPACE)
    edits = {}
    if mask is not None:
        i = next(o.result_index for o in run.obs if o.call_id == mask)
        size = TOKENS.count_text(text_of(msgs[i]["content"]))
        edits[run.anchors[i]] = {"action": "mask", "reason": "old", "tokens": str(size)}
    at = 1 + 2 * ENGINE_AFTER
    return {"edits": edits, "dropped": run.anchors[at : at + 2], "compactions": 1, "names": 2}


def _apply(
    msgs: list[Message], stored: dict[str, Any], budget: int, restore_elided: bool = True
) -> Any:
    """prune with the way back on (``restore_elided``, off by default), the cache warm."""
    size = TOKENS.count_messages(msgs)
    memory = {"requests": 12, "last_at": NOW - 10, "last_tokens": size, "growth": 60.0}
    state = SessionState({prune.NAMESPACE: stored, prune.SESSION: {**memory, "expect_hit": True}})
    context = ctx(msgs, now=NOW, state=state, budget=budget, cache=CacheFacts(last_at=NOW - 10))
    return prune.apply(context, prune.Config(restore_elided=restore_elided))


def _chains_valid(messages: list[Message]) -> bool:
    calls = {c.get("id") for m in messages for c in tool_calls(m)}
    answered = {m.get("tool_call_id") for m in messages if role(m) == "tool"}
    return calls == answered


def _engine_shown(messages: list[Message]) -> bool:
    engine = _engine()
    return any(m.get("tool_call_id") == "e" and text_of(m["content"]) == engine for m in messages)


def _over_budget(msgs: list[Message]) -> int:
    """A budget the session is over (so the compaction is forced) with the engine dropped."""
    at = 1 + 2 * ENGINE_AFTER
    return int(TOKENS.count_messages([*msgs[:at], *msgs[at + 2 :]]) * 0.85)


def test_a_dropped_read_named_again_comes_back_at_a_forced_compaction() -> None:
    msgs = _session(named_again=True)
    budget = _over_budget(msgs)
    out = _apply(msgs, _dropped_engine(msgs), budget)
    info = out.report["prune"]
    assert info["schedule"]["decision"] == "forced" and info["compacted"]
    assert info["restored"] >= 2  # the call and its result, verbatim
    assert _engine_shown(out.messages)
    assert msgs[1 + 2 * ENGINE_AFTER] in out.messages  # the call's message as sent
    assert info["tokens_after"] <= budget and TOKENS.count_messages(out.messages) <= budget
    assert _chains_valid(out.messages)
    assert out.messages[-1] is msgs[-1] and out.messages[0] is msgs[0]  # last result, task
    # the cut took something still shown before instead
    assert out.report["pruning"]

    # without the way back, the drop stands
    kept = _apply(msgs, _dropped_engine(msgs), budget, restore_elided=False)
    assert kept.report["prune"]["compacted"] and not _engine_shown(kept.messages)
    assert "restored" not in kept.report["prune"]


def test_nothing_before_the_rewrite_starts_comes_back(monkeypatch: Any) -> None:
    """A read older than anything this compaction changes stays dropped, named again or not:
    bringing it back would re-bill the prompt from further back than the cut."""
    monkeypatch.setattr(__name__ + ".ENGINE_AFTER", 0)
    msgs = _session(named_again=True)
    out = _apply(msgs, _dropped_engine(msgs), _over_budget(msgs))
    assert out.report["prune"]["compacted"] and not _engine_shown(out.messages)


def test_a_dropped_read_nobody_points_at_again_stays_dropped() -> None:
    msgs = _session(named_again=False)
    out = _apply(msgs, _dropped_engine(msgs), _over_budget(msgs))
    assert out.report["prune"]["compacted"]
    assert not _engine_shown(out.messages)
    assert "restored" not in out.report["prune"]


def test_no_restore_without_a_forced_compaction() -> None:
    """Under the budget with a warm cache nothing is rewritten to bring the read back: the
    stored overlay is replayed byte for byte (the cached prefix stays)."""
    msgs = _session(named_again=True)
    stored = _dropped_engine(msgs)
    out = _apply(msgs, stored, budget=TOKENS.count_messages(msgs) * 4)
    assert not out.report["prune"]["compacted"]
    assert not _engine_shown(out.messages)
    run = Run(ctx(msgs), prune.Config(), prune.NAMESPACE)
    replayed = run.render(overlay.Overlay.load(stored, set(run.anchors)))
    assert out.messages == replayed


def test_an_elision_taken_again_keeps_its_bytes_and_the_result_is_deterministic() -> None:
    msgs = _session(named_again=True)
    stored = _dropped_engine(msgs, mask="s0")
    budget = _over_budget(msgs)
    first, second = _apply(msgs, stored, budget), _apply(msgs, stored, budget)
    assert first.messages == second.messages
    assert first.state.get(prune.NAMESPACE) == second.state.get(prune.NAMESPACE)
    # the masked run was not pointed at again: masked as it was, the same edit, the same bytes
    run = Run(ctx(msgs), prune.Config(), prune.NAMESPACE)
    i = next(o.result_index for o in run.obs if o.call_id == "s0")
    edits = first.state.get(prune.NAMESPACE)["edits"]
    assert edits[run.anchors[i]] == stored["edits"][run.anchors[i]]


def test_reopened_brings_back_whole_turns_and_only_what_is_wanted() -> None:
    anchors = [f"a{i}" for i in range(7)]
    ov = overlay.Overlay(
        {"a2": {"action": "mask", "reason": "r"}, "a4": {"action": "mask", "reason": "r"},
         "a6": {"action": "cap", "reason": "c"}},
        ["a0", "a1", "a5"],
        3,
    )  # fmt: skip
    turns = [[0, 1], [3, 4], [5]]
    back = restore.reopened(anchors, ov, [1, 4], turns)
    assert back is not None
    assert back.dropped == ["a5"]  # the turn of 1 whole, 5 stays
    assert set(back.edits) == {"a2", "a6"}  # 4's mask goes; another mask and the cap stay
    assert back.compactions == 3
    assert restore.reopened(anchors, ov, [], turns) is None
    # from message 3 on: the turn of 1 starts before the rewrite would, 4's mask is after it
    late = restore.reopened(anchors, ov, [1, 4], turns, start=3)
    assert late is not None and late.dropped == ov.dropped and set(late.edits) == {"a2", "a6"}
    assert restore.reopened(anchors, ov, [1], turns, start=1) is None  # its turn starts at 0
    assert restore.reopened(anchors, ov, [6], turns) is None  # a cap is not re-judged
    assert restore.elided_results(anchors, ov, [1, 2, 3, 4, 6]) == [1, 2, 4]
    assert restore.restored(anchors, ov, back) == [0, 1, 4]


def test_named_lately_is_a_file_or_a_name_the_last_calls_use() -> None:
    msgs = _session(named_again=True)
    run = Run(ctx(msgs), prune.Config(), prune.NAMESPACE)
    engine = next(o.result_index for o in run.obs if o.call_id == "e")
    log = next(o.result_index for o in run.obs if o.call_id == "s4")
    assert restore.named_lately(msgs, run.obs, {engine, log}) == [engine]
    # a name a run showed, used by the last call
    used = [*msgs, assistant(None, shell("h", "grep -rn log_4_7 .")), result("h", "none")]
    run = Run(ctx(used), prune.Config(), prune.NAMESPACE)
    assert restore.named_lately(used, run.obs, {engine, log}, calls=1) == [log]


def test_the_first_change_is_where_an_edit_or_a_drop_differs() -> None:
    anchors = ["a0", "a1", "a2", "a3"]
    before = overlay.Overlay({"a1": {"action": "mask", "reason": "r"}}, ["a0"])
    assert restore.first_change(anchors, before, before) == 4
    masked = overlay.Overlay({**before.edits, "a3": {"action": "mask", "reason": "r"}}, ["a0"])
    assert restore.first_change(anchors, before, masked) == 3
    assert restore.first_change(anchors, before, overlay.Overlay(before.edits, [])) == 0
    shrunk = overlay.Overlay({"a1": {"action": "shrink", "reason": "r"}}, ["a0"])
    assert restore.first_change(anchors, before, shrunk) == 1
