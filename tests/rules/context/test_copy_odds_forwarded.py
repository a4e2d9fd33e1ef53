"""copy_odds' new names count what later results show as forwarded: a name only in the middle a
cap cut from a later result, or in a later result elided or dropped, is not shown again."""

from __future__ import annotations

from typing import Any

from rules.activity.observations import observations
from rules.base import SessionState
from rules.context import copy_odds, drop_names, forced, need, prune, replay
from rules.context.overlay import PLACEHOLDER_PREFIX
from rules.context.prune_plan import Run
from rules.messages import text_of
from tests.support.factories import assistant, ctx, result, shell, user

HITS = "\n".join(f"src/mod_{i}.py:{i}: def handler_{i}(request):" for i in range(30))
# a test log that names every handler only in its middle: a cap keeps its head and tail
LOG = "\n".join(
    [f"tests/test_a.py::test_setup_{i} PASSED" for i in range(800)]
    + [f"src/mod_{i}.py:{i}: in handler_{i}: warning deprecated" for i in range(30)]
    + [f"tests/test_b.py::test_teardown_{i} PASSED" for i in range(800)]
)


def _session() -> list[dict[str, Any]]:
    msgs = [
        user("Find the handlers"),
        assistant(None, shell("g", "grep -rn 'def handler_' src")),
        result("g", HITS),
        assistant(None, shell("p", "python -m pytest -v")),
        result("p", LOG),
    ]
    for k in range(4):
        msgs += [
            assistant(None, shell(f"s{k}", f"git status --short {k}")),
            result(f"s{k}", f"M file{k}.txt"),
        ]
    return msgs


def _index(msgs: list[dict[str, Any]], call_id: str) -> int:
    return next(o.result_index for o in observations(msgs) if o.call_id == call_id)


def _new(msgs: list[dict[str, Any]], forwarded: dict[int, str] | None) -> str:
    g = _index(msgs, "g")
    return dict(need.judge(msgs, observations(msgs), [g], forwarded=forwarded)[g].features)["new"]


def test_names_only_in_what_a_later_result_lost_are_not_shown_later() -> None:
    msgs = _session()
    p = _index(msgs, "p")
    assert _new(msgs, None) == "0"  # the log as the client sent it shows every handler again
    head, tail = LOG[:2_000], LOG[-2_000:]
    capped = f"{head}\n{PLACEHOLDER_PREFIX} capped: ...]\n{tail}"
    assert _new(msgs, {p: capped}) == "5+"  # the cap cut them
    assert _new(msgs, {p: ""}) == "5+"  # dropped
    elided = f"{PLACEHOLDER_PREFIX} elided Bash result; it showed: src/mod_1.py:1]"
    assert _new(msgs, {p: elided}) == "5+"  # elided: its digest names one of the thirty
    assert _new(msgs, {p: LOG}) == "0"  # control: forwarded whole


def test_prune_judges_later_names_as_its_overlay_forwards_them(monkeypatch: Any) -> None:
    msgs = _session()
    g, p = _index(msgs, "g"), _index(msgs, "p")
    run = Run(ctx(msgs, state=SessionState()), prune.Config(), prune.NAMESPACE)
    run.cap_new_results()
    forwarded = run.forwarded()
    assert set(forwarded) == {p}  # the log is capped; every other result goes as it came
    assert "handler_" not in forwarded[p] and len(forwarded[p]) < len(LOG)
    assert forwarded[p] == text_of(run.view(run.overlay)[p].get("content"))
    judged: list[dict[int, need.Need]] = []

    def spy(*args: Any, **kwargs: Any) -> dict[int, need.Need]:
        judged.append(judge(*args, **kwargs))
        return judged[-1]

    judge = need.judge
    monkeypatch.setattr(need, "judge", spy)
    steps = run.plan(run.sizes(), drops=True)
    assert dict(judged[0][g].features)["new"] == "5+"  # the log's cut middle is not shown
    rank = next(s.rank for s in steps if g in s.messages)  # the search's turn
    assert rank == judged[0][g].odds + forced.DROP_TEXT_ODDS
    assert judged[0][g].odds > judge(msgs, run.obs, [g])[g].odds  # as sent: less spent


def test_new_names_are_counted_up_to_the_top_bucket() -> None:
    shown = frozenset(f"name_{i}" for i in range(40))
    later = {f"name_{i}" for i in range(37)}
    assert need.new_names(shown, later) == 3  # exact below the top bucket
    assert need.new_names(shown, set()) == copy_odds.NEW_NAMES[-1][0]  # 40 new: the top bucket
    assert need.new_names(shown, later | shown) == 0


def test_a_look_that_is_not_forced_judges_the_need_alone() -> None:
    """The copy model orders forced compactions only: an unforced look's judgement is the same
    need and reuse, without the features' walk over later results."""
    msgs = _session()
    obs = observations(msgs)
    every = [o.result_index for o in obs]
    full, plain = need.judge(msgs, obs, every), need.judge(msgs, obs, every, odds=False)
    assert [(n.needed, n.why, n.reuse) for n in full.values()] == [
        (n.needed, n.why, n.reuse) for n in plain.values()
    ]
    assert all(n.odds == 0.0 and n.features == () for n in plain.values())
    assert all(n.odds > 0 and n.features for n in full.values())


def _dropped_later_search(names: int) -> tuple[list[dict[str, Any]], int, dict[int, str]]:
    """An older search, then a later one over the same handlers whose turn is dropped, its line
    listing the names its result showed when ``names`` says so (``drop_names.NAMES_*``)."""
    hits = "\n".join(f"src/mod_{i}.py:{i}: def handler_{i}(request):" for i in range(4))
    msgs = [
        user("Find the handlers"),
        assistant(None, shell("g", "grep -rn 'def handler_' src")),
        result("g", hits),
        user("now look again"),
        assistant(None, shell("b", "grep -rn handler_ src | head -4")),
        result("b", hits.replace("def ", "")),
    ]
    for k in range(6):
        msgs += [assistant(None, shell(f"s{k}", f"git status {k}")), result(f"s{k}", f"M f{k}")]
    msgs.append(user("continue"))
    b = _index(msgs, "b")
    anchors = Run(ctx(msgs, state=SessionState()), prune.Config(), prune.NAMESPACE).anchors
    stored = {"edits": {}, "dropped": [anchors[b - 1], anchors[b]], "compactions": 1}
    stored["names"] = names
    state = SessionState().with_value(prune.NAMESPACE, stored)
    run = Run(ctx(msgs, state=state), prune.Config(), prune.NAMESPACE)
    run.cap_new_results()
    run.sizes()
    return msgs, b, run.forwarded()


def test_a_dropped_run_s_line_is_what_its_last_result_is_forwarded_as() -> None:
    msgs, b, forwarded = _dropped_later_search(drop_names.NAMES_IN_ORDER)
    assert forwarded[b].startswith(f"{PLACEHOLDER_PREFIX} dropped 2 earlier messages")
    assert "handler_3" in forwarded[b]  # the line lists the names the dropped search showed
    assert _new(msgs, forwarded) == "0"  # the older search's names are all shown later
    msgs, b, forwarded = _dropped_later_search(drop_names.NAMES_NONE)  # a line without names
    assert "handler_3" not in forwarded[b]
    assert _new(msgs, forwarded) == "5+"


def test_only_the_last_result_of_a_dropped_run_is_given_its_line() -> None:
    msgs = [user("u")]
    for k in range(3):
        msgs += [assistant(None, shell(f"c{k}", f"ls {k}")), result(f"c{k}", f"f{k}.py")]
    line = {"role": "user", "content": "[dropped 4 earlier messages]"}
    results = [2, 4, 6]
    view = [msgs[0], line, msgs[5], msgs[6]]  # messages 1-4 dropped as one run
    got = replay.forwarded_results(msgs, view, [0, -1, 5, 6], results)
    assert got == {2: "", 4: "[dropped 4 earlier messages]"}
    view = [msgs[0], msgs[1], msgs[2], msgs[3], msgs[4], line]  # a run at the very end
    got = replay.forwarded_results(msgs, view, [0, 1, 2, 3, 4, -1], results)
    assert got == {6: "[dropped 4 earlier messages]"}
