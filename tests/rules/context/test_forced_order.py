"""A compaction the budget forces frees its tokens where the fewest later copies are lost: masks
of results and drops of whole old turns in one order, the least chance of being copied from per
token freed first (``rules/context/forced.py``, the chance from ``copy_odds``); and it goes down to
the goal that leaves room for several requests of growth, not just under the budget."""

from __future__ import annotations

from typing import Any

from rules.base import CacheFacts, SessionState
from rules.context import forced, need, prune, schedule
from rules.context.prune_plan import Run
from rules.context.schedule import Step
from tests.support.factories import TOKENS, assistant, call, ctx, result, shell, user


def _runs(sizes: list[int], tag: str = "c", shown: int = 1) -> list[dict[str, Any]]:
    """A task, then one shell run per size, its output that many lines of distinct words; each
    ``shown`` runs in a row show the same names (all but the last of them shown again later)."""
    out: list[dict[str, Any]] = [user("Find why the release build is slow")]
    for k, lines in enumerate(sizes):
        names = f"{tag}_{k // shown}_timer"
        body = "\n".join(f"{names}_{i} took {i * 7 % 13} ms" for i in range(lines))
        cid = f"{tag}{k}"
        out += [assistant(None, shell(cid, f"./measure --{tag} {k}")), result(cid, body)]
    return out


def _plan(messages: list[dict[str, Any]]) -> tuple[Run, list[Step]]:
    run = Run(ctx(messages), prune.Config(), prune.NAMESPACE)
    return run, run.plan(run.sizes(), drops=True)


def test_the_rate_is_the_chance_per_token_freed() -> None:
    small, large = Step("mask", 100, 1, (1,), reuse=0.05), Step("mask", 5_000, 3, (3,), reuse=0.2)
    assert large.loss_per_token() < small.loss_per_token()
    assert Step("mask", 0, 5, (5,), reuse=0.1).loss_per_token() == 0.1  # never divides by 0


def test_masks_and_drops_come_in_one_order_of_loss_per_token() -> None:
    # runs in pairs, the second showing the first's names again: the first is spent
    _, steps = _plan(_runs([20] * 4 + [600] + [20] * 21, shown=2))
    costly = [s for s in steps if s.stage in ("mask", "drop")]
    masks = [s.loss_per_token() for s in costly if s.stage == "mask"]
    assert masks == sorted(masks)
    # the drops are not all after the masks: an old turn can go before a recent result
    stages = [s.stage for s in costly]
    assert "drop" in stages
    assert stages.index("drop") < max(i for i, s in enumerate(stages) if s == "mask")


def test_the_order_is_by_chance_per_token_and_gains_are_not_counted_twice() -> None:
    judged = {i: need.Need(False, "", 0.01, odds=p) for i, p in ((2, 0.01), (4, 0.05), (6, 0.2))}
    sizes = {1: 100, 2: 1_000, 3: 100, 4: 1_000, 5: 100, 6: 400}
    masks = [(2, "old"), (6, "recent")]
    turns = [[1, 2], [3, 4]]
    shrunk = Step("shrink", 60, 3, (3,))
    steps = forced.order(masks, turns, judged, sizes, whole={2, 4}, before=[shrunk])
    assert [(s.stage, s.first) for s in steps] == [
        ("mask", 2),  # 0.01 for 930 tokens
        ("drop", 1),  # 0.03 for 1,100
        ("drop", 3),  # 0.07 for 1,100
        ("mask", 6),  # 0.2 for 330
    ]
    by = {(s.stage, s.first): s.freed for s in steps}
    assert by[("drop", 1)] == 1_100 - 930  # its result masked just before: what is left
    assert by[("drop", 3)] == 1_100 - 60  # the shrink's gain is not freed again
    # a mask after its turn went frees nothing: it is left out
    big_turn = {**sizes, 3: 2_000, 4: 100}  # its prose is the bulk: the drop goes first
    after = forced.order([(4, "old")], [[3, 4]], judged, big_turn, whole={4})
    assert [s.stage for s in after] == ["drop"]


def test_a_turn_holding_a_files_latest_write_goes_last() -> None:
    judged = {2: need.Need(False, "", 0.01, odds=0.0), 4: need.Need(False, "", 0.01, odds=0.5)}
    sizes = {1: 100, 2: 1_000, 3: 100, 4: 100}
    steps = forced.order([(4, "m")], [[1, 2]], judged, sizes, whole={2, 4}, late_turns={1})
    assert [s.stage for s in steps] == ["mask", "drop"]
    assert steps[1].reason == forced.LAST_RESORT


def test_a_latest_write_is_dropped_only_to_fit_the_budget_not_to_reach_the_goal() -> None:
    spent = Step("drop", 100, 3, (3, 4), reuse=0.0)  # a turn of spent output, first
    mask = Step("mask", 300, 5, (5,), reuse=0.1)
    late = Step("drop", 2_000, 1, (1, 2), forced.LAST_RESORT, reuse=0.0)
    prefix = [0, 100, 1_100, 2_100, 2_200, 3_500, 3_900]
    facts = CacheFacts()
    memory = schedule.Memory(requests=10, last_tokens=4_000, growth=400.0)

    def choose(total: int, room: int) -> schedule.Choice:
        plan = [spent, mask, late]
        return schedule.choose(plan, prefix, total, room, 1_000, facts, memory, "warm", {}, 10)

    # over the budget; the goal (room for 5 requests of growth) needs the write's turn, the
    # budget does not: it stays
    choice = choose(4_000, 3_800)
    assert choice.figures["goal"] < 3_600 and choice.steps == 2
    # the others do not fit the budget: the write goes too
    assert choose(4_000, 3_500).steps == 3


def test_a_result_a_later_call_uses_is_weighed_as_more_likely_copied() -> None:
    # 6 to 20 turns old (at 21 to 50 turns the pack holds 3.0% for a build used lately, 5.1%
    # for one not used: both keys from over 25 conversations, the second's copies from 5)
    sizes = [40] * 18
    messages = _runs(sizes)
    # a recent call names what the second run printed
    messages += [assistant(None, shell("s", "grep -n c_1_timer_3 log")), result("s", "hit")]
    run, steps = _plan(messages)
    wanted = next(o.result_index for o in run.obs if o.call_id == "c1")
    alike = next(o.result_index for o in run.obs if o.call_id == "c2")
    judged = need.judge(messages, run.obs, [wanted, alike])
    assert judged[wanted].needed and not judged[alike].needed
    assert judged[wanted].odds > judged[alike].odds

    # the step that removes it (its mask, or its turn's drop) comes later
    def removed_at(i: int) -> int:
        return next(k for k, s in enumerate(steps) if i in s.messages)

    assert removed_at(alike) < removed_at(wanted)


def test_a_turn_whose_result_is_spent_goes_before_a_read_the_agent_may_copy_from() -> None:
    # an old turn: a run whose output was already elided; a recent read of a file nobody changed
    body = "\n".join(f"def handler_{i}(request):\n    return route_{i}(request)" for i in range(60))
    messages: list[dict[str, Any]] = [user("Fix the router")]
    messages += _runs([30] * 12)[1:]
    messages += [assistant(None, call("r", "Read", file_path="app/router.py")), result("r", body)]
    messages += _runs([5] * 3, "late")[1:]
    run, _ = _plan(messages)
    spent = next(o.result_index for o in run.obs if o.call_id == "c0")
    read = next(o.result_index for o in run.obs if o.call_id == "r")
    anchors = run.anchors
    run.overlay.edits[anchors[spent]] = {"action": "mask", "reason": "old", "digest": "1"}
    steps = run.plan(run.sizes(), drops=True)
    order = [(s.stage, s.first) for s in steps]
    drop_spent = order.index(("drop", spent - 1))
    read_removed = next(k for k, s in enumerate(steps) if read in s.messages)
    assert drop_spent < read_removed


def test_a_turn_is_charged_for_the_results_it_still_shows_whole() -> None:
    judged = {
        2: need.Need(False, "", 0.01, odds=0.3),
        4: need.Need(False, "", 0.01, odds=0.2),
    }
    sizes = {1: 50, 2: 400, 3: 50, 4: 400}
    steps = forced.order([], [[1, 2], [3, 4]], judged, sizes, whole={2})
    by_first = {s.first: s for s in steps}
    assert by_first[1].rank == 0.3 + forced.DROP_TEXT_ODDS
    assert by_first[1].reuse == 0.01 + forced.DROP_TEXT_ODDS  # the schedule's charge
    assert by_first[3].rank == forced.DROP_TEXT_ODDS  # its result was elided already
    assert [s.first for s in steps] == [3, 1]


def test_a_forced_compaction_leaves_room_for_five_requests_of_growth() -> None:
    messages = _runs([60] * 30)
    size = TOKENS.count_messages(messages)
    budget = int(size * 0.8)
    growth = 0.08 * budget  # five requests of it: 40% of the budget, within the target's half
    state = SessionState(
        {
            prune.SESSION: {
                "requests": 30,
                "last_at": 9_990.0,
                "last_tokens": size,
                "growth": growth,
                "expect_hit": True,
            }
        }
    )
    context = ctx(messages, now=10_000.0, state=state, budget=budget, cache=CacheFacts())
    out = prune.apply(context, prune.Config())
    info = out.report["prune"]
    assert info["schedule"]["decision"] == "forced"
    goal = info["schedule"]["goal"]
    assert goal < budget - 4 * growth
    # not merely under the budget: down to the goal (give or take a dropped run's line)
    assert info["tokens_after"] <= budget - 4 * growth


def _code(tag: str, n: int) -> str:
    return "\n".join(f"def {tag}_fn_{i}(x):\n    return x + {i}" for i in range(n))


def _forced(msgs: list[dict[str, Any]], share: float, growth: float) -> Any:
    size = TOKENS.count_messages(msgs)
    memory = {"requests": 12, "last_at": 9_990.0, "last_tokens": size, "growth": growth}
    state = SessionState({prune.SESSION: {**memory, "expect_hit": True}})
    budget = int(size * share)
    return prune.apply(
        ctx(msgs, now=10_000.0, state=state, budget=budget, cache=CacheFacts()), prune.Config()
    )


def test_the_turn_with_the_latest_result_is_dropped_only_to_fit() -> None:
    """A user's word after the last result starts the current turn, so the turn with that result
    is an old one: a large output is likely copied per token less than a small read, yet it is
    what the agent acts on next, so it goes only when nothing else fits."""
    msgs = [user("Refactor the parser module")]
    for k in range(8):
        read = assistant(None, call(f"r{k}", "Read", file_path=f"src/m{k}.py"))
        msgs += [read, result(f"r{k}", _code(f"m{k}", 60))]
    lines = "\n".join(f"tests/test_parser.py::test_case_{i} PASSED [{i}%]" for i in range(250))
    run = assistant("Running the tests now.", shell("t", "python -m pytest -q tests/"))
    msgs += [run, result("t", lines), user("ok, go on")]
    for share in (0.9, 0.7):
        out = _forced(msgs, share, 100.0)
        assert out.report["pruning"], share  # forced: something went
        assert msgs[-2] in out.messages and msgs[-3] in out.messages, share


def test_a_users_earlier_instruction_is_dropped_only_to_fit() -> None:
    """A user's message mid-session holds no result, so by chance per token it would go first;
    the working set keeps only the goal and the latest instruction, so it goes only to fit."""
    msgs = [user("Refactor the parser module")]
    rule = user("Constraints: keep every public signature in src/, keep Python 3.8 support. " * 6)
    for k in range(8):
        read = assistant(None, call(f"r{k}", "Read", file_path=f"src/m{k}.py"))
        msgs += [read, result(f"r{k}", _code(f"m{k}", 60))] + ([rule] if k == 3 else [])
    msgs += [assistant(None, shell("t", "pytest -q")), result("t", "5 passed"), user("continue")]
    out = _forced(msgs, 0.93, 50.0)
    assert out.report["pruning"]
    assert rule in out.messages


def test_two_latest_writes_are_not_both_dropped_when_one_fits() -> None:
    """Last resorts are taken only until the request fits the budget, not down to the goal."""
    spent = Step("drop", 100, 3, (3, 4), reuse=0.0)
    mask = Step("mask", 300, 5, (5,), reuse=0.1)
    late1 = Step("drop", 500, 1, (1, 2), forced.LAST_RESORT, reuse=0.0)
    late2 = Step("drop", 500, 6, (6, 7), forced.LAST_RESORT, reuse=0.0)
    prefix = [0, 100, 600, 1100, 1200, 1500, 1800, 2300, 4000]
    memory = schedule.Memory(requests=10, last_tokens=4_000, growth=400.0)
    steps = [spent, mask, late1, late2]
    choice = schedule.choose(steps, prefix, 4000, 3500, 1000, CacheFacts(), memory, "warm", {}, 10)
    assert choice.tokens_after == 3100  # spent, mask and one latest write: 3,100 fit 3,500
    assert sum(s.reason == forced.LAST_RESORT for s in steps[: choice.steps]) == 1


def test_a_reminder_that_came_with_the_results_leaves_their_call_in_the_current_turn() -> None:
    """Claude Code sends a `<system-reminder>` beside a `tool_result`: lowered, a user message
    of wrappers only after the results. It starts no turn: the call those results answer, what
    the model acts on next, stays in the current turn, as it does with no reminder."""
    reminder = "<system-reminder>\nThe task tools haven't been used recently.\n</system-reminder>"
    msgs = [user("Refactor the parser module")]
    for k in range(10):  # the last read the largest: only its drop would fit the budget
        read = assistant(None, call(f"r{k}", "Read", file_path=f"src/m{k}.py"))
        msgs += [read, result(f"r{k}", _code(f"m{k}", 400 if k == 9 else 30))]
    for tail in ([user(reminder)], []):
        for share in (0.5, 0.3):
            out = _forced(msgs + tail, share, 50.0)
            assert out.report["pruning"], share
            assert msgs[-2] in out.messages and msgs[-1] in out.messages, (tail, share)
